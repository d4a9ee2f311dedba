-- A person's own labels and labels learned from their devices (issue 40; mapping/labels.py).
-- They live in the person's database, so an upgrade of the package never undoes them.
-- key: the title or pattern as titles are compared (normalised words, `*` kept);
-- origin: 'you' (the person's, always wins) or 'learned'; applied: a learned label below the
-- apply thresholds is only proposed; evidence: why it was learned.
CREATE TABLE labels (
    key VARCHAR NOT NULL,
    origin VARCHAR NOT NULL,
    pattern VARCHAR NOT NULL,
    action VARCHAR NOT NULL,
    applied BOOLEAN NOT NULL DEFAULT true,
    evidence VARCHAR,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (key, origin)
);

-- Where an event's action came from: the classifier's method (mapping/actions.py METHODS:
-- 'label' = your label, 'learned' = learned from your devices, else the keyword table).
ALTER TABLE events ADD COLUMN action_source VARCHAR;
