-- Samples with one source per metric and window (issue 24, docs/storage.md "One truth").
--
-- Cumulative metrics (steps, energy, distance, ...) are chosen per local hour, from the
-- samples that fit in an hour or two ("fine": a watch's or phone's minutes); a day-long
-- total ("coarse": a ring's or a Garmin summary's whole-day steps, two hours or more) can
-- only stand for its whole day: a day takes the coarse total of the best-ranked device when
-- that device outranks every device with fine samples that day, else the fine samples
-- (hour by hour) and no coarse total. Other metrics are chosen per local day.
-- In each window the source of the best-ranked device kind (source_priority) that has data
-- there wins; ties within a kind go to the larger amount, then the source name. Amounts of
-- two devices are never added.
WITH s AS (
    SELECT samples.*,
        device_kind(source, source_name, device) AS kind,
        metric_group(metric) AS grp,
        metric_group(metric) = 'activity' AND epoch(end_ts) - epoch(start_ts) >= 7200 AS coarse
    FROM samples
),
r AS (
    SELECT s.*, coalesce(p.rank, 99) AS rank,
        CASE WHEN s.grp = 'activity' AND NOT s.coarse
             THEN floor((epoch(s.start_ts) + 60 * coalesce(s.tz_offset_min, 0)) / 3600) ELSE -1 END AS win
    FROM s LEFT JOIN source_priority p ON p.grp = s.grp AND p.kind = s.kind
),
day_mode AS (  -- cumulative metrics: the day's coarse total, or its fine hours
    SELECT local_day, metric,
        min(rank) FILTER (WHERE coarse) < coalesce(min(rank) FILTER (WHERE NOT coarse), 1000) AS use_coarse
    FROM r WHERE grp = 'activity' GROUP BY ALL
),
eligible AS (
    SELECT r.* FROM r LEFT JOIN day_mode d ON r.local_day = d.local_day AND r.metric = d.metric
    WHERE r.grp <> 'activity' OR r.coarse = coalesce(d.use_coarse, false)
),
per_source AS (
    SELECT local_day, metric, win, source, source_name, min(rank) AS rank, sum(value) AS amount
    FROM eligible GROUP BY ALL
),
winner AS (
    SELECT local_day, metric, win, source, source_name
    FROM per_source
    QUALIFY row_number() OVER (
        PARTITION BY local_day, metric, win ORDER BY rank, amount DESC, source, source_name) = 1
)
SELECT e.source, e.metric, e.start_ts, e.end_ts, e.value, e.unit, e.local_day, e.source_name, e.device,
    e.tz_offset_min, e.detail, e.kind
FROM eligible e JOIN winner w
    ON e.local_day = w.local_day AND e.metric = w.metric AND e.win = w.win
    AND e.source = w.source AND e.source_name = w.source_name
