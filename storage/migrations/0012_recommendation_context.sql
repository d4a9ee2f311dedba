-- Answers that move *when* as well as *what* (issue 37): each recommendation keeps the context
-- the planner placed it in, "<kind of day>/<position>" (agent.day.objective.context_of): the
-- kind of day (after_night_shift, night_shift, work_day, free_day) and the position in it
-- (first_hours, before_commitment, late, open). An answer to it is counted in that context,
-- so an ignored 08:00 block after a night shift says "not then, after nights" and does not
-- spill onto ordinary mornings. Null for blocks stored before this migration.
ALTER TABLE recommendations ADD COLUMN context VARCHAR;
