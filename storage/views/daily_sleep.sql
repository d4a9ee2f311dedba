-- One row per local_day: the main night's sleep (naps summed separately), from the one
-- source chosen for that day (sleep_sessions_merged: ring, strap, watch, phone).
SELECT
    local_day,
    source,
    sum(sleep_min) FILTER (WHERE NOT is_nap) AS sleep_min,
    sum(in_bed_min) FILTER (WHERE NOT is_nap) AS in_bed_min,
    sum(deep_min) FILTER (WHERE NOT is_nap) AS deep_min,
    sum(rem_min) FILTER (WHERE NOT is_nap) AS rem_min,
    avg(efficiency_pct) FILTER (WHERE NOT is_nap) AS efficiency_pct,
    sum(sleep_min) FILTER (WHERE is_nap) AS nap_min,
    count(*) AS sessions
FROM sleep_sessions_merged
GROUP BY local_day, source
