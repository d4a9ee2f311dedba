-- A recommendation is a time block of a real day (issue 19): when it starts and ends, what
-- kind of block it is (block, nap, sleep_in, bedtime, early_night), the facts behind it
-- (a JSON list of sentences with the person's numbers) and the meter changes the agent
-- expects (a JSON object: meter -> change). `meters_before` keeps the slot's meters as the
-- agent saw them when it recommended (a JSON list of five numbers, null where a meter was not
-- observed), so an answer can later be read against the state it was given in.
ALTER TABLE recommendations ADD COLUMN start_ts TIMESTAMPTZ;
ALTER TABLE recommendations ADD COLUMN end_ts TIMESTAMPTZ;
ALTER TABLE recommendations ADD COLUMN kind VARCHAR;
ALTER TABLE recommendations ADD COLUMN evidence JSON;
ALTER TABLE recommendations ADD COLUMN expected_effect JSON;
ALTER TABLE recommendations ADD COLUMN meters_before JSON;
