-- Apple Health daily totals of cumulative metrics, counting each hour once.
-- iPhone, Apple Watch and apps all write their own StepCount/ActiveEnergy/... samples for
-- the same minutes; summing them double counts. Source-priority rule
-- (connectors/healthkit/README.md): within each local hour, take only the samples of the
-- highest-priority source that has data in that hour:
--   1 Apple Watch (device model Watch, or source name containing "Watch"),
--   2 iPhone (device model iPhone, or source name containing "iPhone"),
--   3 any other app or device;
-- ties within a rank go to the source with the larger hourly amount (then by name).
-- A sample belongs to the local hour it starts in (start_ts shifted by its own offset).
WITH s AS (
    SELECT
        local_day,
        metric,
        source_name,
        value,
        floor((epoch(start_ts) + 60 * coalesce(tz_offset_min, 0)) / 3600) AS local_hour,
        CASE
            WHEN coalesce(device, '') ILIKE '%model:Watch%' OR source_name ILIKE '%watch%' THEN 1
            WHEN coalesce(device, '') ILIKE '%model:iPhone%' OR source_name ILIKE '%iphone%' THEN 2
            ELSE 3
        END AS priority
    FROM samples
    WHERE source = 'healthkit'
      AND metric IN ('steps', 'active_energy', 'basal_energy', 'distance', 'exercise_time', 'floors')
      AND value IS NOT NULL
),
per_source_hour AS (
    SELECT local_day, metric, local_hour, source_name, min(priority) AS priority, sum(value) AS amount
    FROM s
    GROUP BY local_day, metric, local_hour, source_name
),
chosen AS (
    SELECT *
    FROM per_source_hour
    QUALIFY row_number() OVER (
        PARTITION BY local_day, metric, local_hour ORDER BY priority, amount DESC, source_name
    ) = 1
)
SELECT
    local_day,
    metric,
    sum(amount) AS total,
    count(*) AS hours,
    string_agg(DISTINCT source_name, ', ' ORDER BY source_name) AS sources
FROM chosen
GROUP BY local_day, metric
