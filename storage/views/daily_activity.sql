-- One row per local_day: activity totals, workouts and vitals, from the merged layer (one
-- source per metric and window: samples_merged, workouts_merged): each hour's steps and
-- energy counted once, from the best device that has them; vitals from the best device of
-- the day.
WITH totals AS (
    SELECT local_day,
        sum(value) FILTER (WHERE metric = 'steps') AS steps,
        sum(value) FILTER (WHERE metric = 'active_energy') AS active_energy_kcal,
        sum(value) FILTER (WHERE metric = 'mindful') AS mindful_min,
        sum(value) FILTER (WHERE metric = 'exercise_time') AS exercise_min
    FROM samples_merged
    WHERE metric IN ('steps', 'active_energy', 'mindful', 'exercise_time')
    GROUP BY local_day
),
vitals AS (
    SELECT local_day,
        avg(value) FILTER (WHERE metric = 'resting_heart_rate') AS resting_hr_bpm,
        avg(value) FILTER (WHERE metric = 'hrv_rmssd') AS hrv_rmssd_ms,
        avg(value) FILTER (WHERE metric = 'hrv_sdnn') AS hrv_sdnn_ms,
        avg(value) FILTER (WHERE metric = 'heart_rate') AS avg_hr_bpm,
        avg(value) FILTER (WHERE metric = 'stress') AS stress_avg,
        avg(value) FILTER (WHERE metric = 'recovery') AS recovery_pct
    FROM samples_merged
    WHERE metric IN ('resting_heart_rate', 'hrv_rmssd', 'hrv_sdnn', 'heart_rate', 'stress', 'recovery')
    GROUP BY local_day
),
w AS (
    SELECT local_day, count(*) AS workouts, sum(duration_min) AS workout_min
    FROM workouts_merged GROUP BY local_day
),
night AS (  -- devices that give HRV and resting heart rate with the night (a ring, a strap)
    SELECT local_day, avg(hrv_rmssd_ms) AS hrv_rmssd_ms, min(resting_hr_bpm) AS resting_hr_bpm
    FROM sleep_sessions_merged WHERE NOT is_nap GROUP BY local_day
)
SELECT d.local_day, t.steps, t.active_energy_kcal, t.mindful_min, t.exercise_min,
    coalesce(v.resting_hr_bpm, n.resting_hr_bpm) AS resting_hr_bpm,
    coalesce(v.hrv_rmssd_ms, n.hrv_rmssd_ms) AS hrv_rmssd_ms,
    v.hrv_sdnn_ms, v.avg_hr_bpm, v.stress_avg, v.recovery_pct,
    coalesce(w.workouts, 0) AS workouts, w.workout_min
FROM (SELECT local_day FROM totals UNION SELECT local_day FROM vitals UNION SELECT local_day FROM w
      UNION SELECT local_day FROM night WHERE hrv_rmssd_ms IS NOT NULL OR resting_hr_bpm IS NOT NULL) d
LEFT JOIN totals t USING (local_day)
LEFT JOIN vitals v USING (local_day)
LEFT JOIN w USING (local_day)
LEFT JOIN night n USING (local_day)
