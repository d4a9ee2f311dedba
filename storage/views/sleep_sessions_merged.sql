-- Sleep sessions with one source per wake-up day (main nights and naps apart): the source of
-- the best-ranked device kind for sleep (source_priority: ring, strap, watch, phone), ties
-- to the one that recorded more sleep. Two devices' nights are never added.
WITH s AS (
    SELECT sleep_sessions.*, device_kind(source, source_name, NULL) AS kind FROM sleep_sessions
),
r AS (
    SELECT s.*, coalesce(p.rank, 99) AS rank
    FROM s LEFT JOIN source_priority p ON p.grp = 'sleep' AND p.kind = s.kind
),
per_source AS (
    SELECT local_day, is_nap, source, min(rank) AS rank,
        sum(coalesce(sleep_min, epoch(end_ts - start_ts) / 60)) AS total
    FROM r GROUP BY ALL
),
winner AS (
    SELECT local_day, is_nap, source FROM per_source
    QUALIFY row_number() OVER (PARTITION BY local_day, is_nap ORDER BY rank, total DESC, source) = 1
)
SELECT r.* EXCLUDE (rank)
FROM r JOIN winner w ON r.local_day = w.local_day AND r.is_nap = w.is_nap AND r.source = w.source
