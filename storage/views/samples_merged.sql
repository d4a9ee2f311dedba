-- Samples with one source per metric and window (issue 24, docs/storage.md "One truth"):
-- cumulative metrics (steps, energy, distance, ...) per local hour, the others per local day.
-- In each window the source of the best-ranked device kind (source_priority) that has data
-- there wins; ties within a kind go to the larger amount, then the source name. Overlapping
-- amounts of two devices are never added.
WITH s AS (
    SELECT samples.*,
        device_kind(source, source_name, device) AS kind,
        metric_group(metric) AS grp,
        CASE WHEN metric_group(metric) = 'activity'
             THEN floor((epoch(start_ts) + 60 * coalesce(tz_offset_min, 0)) / 3600) ELSE -1 END AS win
    FROM samples
),
r AS (
    SELECT s.*, coalesce(p.rank, 99) AS rank
    FROM s LEFT JOIN source_priority p ON p.grp = s.grp AND p.kind = s.kind
),
per_source AS (
    SELECT local_day, metric, win, source, source_name, min(rank) AS rank, sum(value) AS amount
    FROM r GROUP BY ALL
),
winner AS (
    SELECT local_day, metric, win, source, source_name
    FROM per_source
    QUALIFY row_number() OVER (
        PARTITION BY local_day, metric, win ORDER BY rank, amount DESC, source, source_name) = 1
)
SELECT r.source, r.metric, r.start_ts, r.end_ts, r.value, r.unit, r.local_day, r.source_name, r.device,
    r.tz_offset_min, r.detail, r.kind
FROM r JOIN winner w
    ON r.local_day = w.local_day AND r.metric = w.metric AND r.win = w.win
    AND r.source = w.source AND r.source_name = w.source_name
