-- One row per local_day across every source: the day at a glance.
WITH days AS (
    SELECT local_day FROM daily_activity
    UNION SELECT local_day FROM daily_sleep
    UNION SELECT local_day FROM daily_calendar
),
sleep AS (
    SELECT local_day, max(sleep_min) AS sleep_min, max(deep_min) AS deep_min,
        max(rem_min) AS rem_min, max(efficiency_pct) AS sleep_efficiency_pct
    FROM daily_sleep GROUP BY local_day
)
SELECT days.local_day, s.sleep_min, s.deep_min, s.rem_min, s.sleep_efficiency_pct,
    a.steps, a.active_energy_kcal, a.resting_hr_bpm, a.hrv_rmssd_ms, a.hrv_sdnn_ms,
    a.recovery_pct, a.stress_avg, a.mindful_min, coalesce(a.workouts, 0) AS workouts,
    coalesce(c.timed_events, 0) AS events, c.busy_min
FROM days
LEFT JOIN sleep s USING (local_day)
LEFT JOIN daily_activity a USING (local_day)
LEFT JOIN daily_calendar c USING (local_day)
ORDER BY days.local_day
