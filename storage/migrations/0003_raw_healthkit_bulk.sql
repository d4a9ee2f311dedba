-- raw_healthkit gets ~130 k rows per million Apple Health Records. Its PRIMARY KEY kept an
-- ART index over every row pinned in memory during an import (~90 bytes a row: 12 MB per
-- million Records, growing with the history), inside the writer's DuckDB memory limit,
-- where large imports ran out of memory. As for samples (0002), the natural key
-- (kind, natural_key) stays the identity of a row and is enforced by the writer: rows are
-- staged unindexed and merged on the key (storage/db.py BULK_KEYS).
CREATE TABLE raw_healthkit_v2 (
    kind VARCHAR NOT NULL,
    natural_key VARCHAR NOT NULL,
    fetched_at TIMESTAMPTZ NOT NULL,
    payload JSON,
    hash VARCHAR NOT NULL
);
INSERT INTO raw_healthkit_v2 SELECT kind, natural_key, fetched_at, payload, hash FROM raw_healthkit;
DROP TABLE raw_healthkit;
ALTER TABLE raw_healthkit_v2 RENAME TO raw_healthkit;
