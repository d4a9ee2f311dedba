-- samples can hold tens of millions of rows (a 4 GB Apple Health export is ~9 M Records).
-- A PRIMARY KEY keeps an in-memory ART index over every row, which grew import memory past
-- 1 GB. The natural key (source, metric, source_name, start_ts, end_ts) stays the identity of
-- a row, but it is enforced by the writer: imports append to an unindexed staging table and
-- merge once on the natural key (storage/db.py BULK_KEYS), which spills to disk instead.
CREATE TABLE samples_v2 (
    source VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    start_ts TIMESTAMPTZ NOT NULL,
    end_ts TIMESTAMPTZ NOT NULL,
    value DOUBLE,
    unit VARCHAR,
    local_day DATE NOT NULL,
    source_name VARCHAR NOT NULL DEFAULT '',
    device VARCHAR,
    tz_offset_min INTEGER,
    detail VARCHAR
);
INSERT INTO samples_v2 SELECT source, metric, start_ts, end_ts, value, unit, local_day, source_name, device, tz_offset_min, detail FROM samples;
DROP TABLE samples;
ALTER TABLE samples_v2 RENAME TO samples;
