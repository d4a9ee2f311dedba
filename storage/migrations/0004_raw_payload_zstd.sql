-- Raw payloads (JSON text: HRV beat lists, workouts, API responses) are stored with zstd.
-- DuckDB's default for strings (dictionary / FSST) spent ~0.8 s analysing and compressing
-- the ~77 MB of payloads of a 1 M-Record Apple Health import and stored them in 33 MB;
-- zstd takes ~0.35 s and 10 MB (measured on that import's 130 k raw rows). Reading a
-- payload back is a little slower (a full scan of those rows: 26 -> 39 ms). The tables are
-- rebuilt with the column's compression in the catalog; every row is kept.
CREATE TABLE raw_healthkit_v4 (
    kind VARCHAR NOT NULL,
    natural_key VARCHAR NOT NULL,
    fetched_at TIMESTAMPTZ NOT NULL,
    payload JSON USING COMPRESSION zstd,
    hash VARCHAR NOT NULL
);
INSERT INTO raw_healthkit_v4 SELECT kind, natural_key, fetched_at, payload, hash FROM raw_healthkit;
DROP TABLE raw_healthkit;
ALTER TABLE raw_healthkit_v4 RENAME TO raw_healthkit;

CREATE TABLE raw_garmin_v4 (kind VARCHAR NOT NULL, natural_key VARCHAR NOT NULL, fetched_at TIMESTAMPTZ NOT NULL, payload JSON USING COMPRESSION zstd, hash VARCHAR NOT NULL, PRIMARY KEY (kind, natural_key));
INSERT INTO raw_garmin_v4 SELECT kind, natural_key, fetched_at, payload, hash FROM raw_garmin;
DROP TABLE raw_garmin;
ALTER TABLE raw_garmin_v4 RENAME TO raw_garmin;

CREATE TABLE raw_whoop_v4 (kind VARCHAR NOT NULL, natural_key VARCHAR NOT NULL, fetched_at TIMESTAMPTZ NOT NULL, payload JSON USING COMPRESSION zstd, hash VARCHAR NOT NULL, PRIMARY KEY (kind, natural_key));
INSERT INTO raw_whoop_v4 SELECT kind, natural_key, fetched_at, payload, hash FROM raw_whoop;
DROP TABLE raw_whoop;
ALTER TABLE raw_whoop_v4 RENAME TO raw_whoop;

CREATE TABLE raw_calendar_v4 (kind VARCHAR NOT NULL, natural_key VARCHAR NOT NULL, fetched_at TIMESTAMPTZ NOT NULL, payload JSON USING COMPRESSION zstd, hash VARCHAR NOT NULL, PRIMARY KEY (kind, natural_key));
INSERT INTO raw_calendar_v4 SELECT kind, natural_key, fetched_at, payload, hash FROM raw_calendar;
DROP TABLE raw_calendar;
ALTER TABLE raw_calendar_v4 RENAME TO raw_calendar;
