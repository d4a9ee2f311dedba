-- Workouts counted once: a workout is left out when another one overlaps it by more than
-- half of the shorter of the two and comes from a better-ranked device kind
-- (source_priority 'workouts': watch, strap, ring, phone), or the same rank and an earlier
-- source / id. The same run recorded by the watch and the strap is one run.
WITH w AS (
    SELECT workouts.*, device_kind(source, source_name, NULL) AS kind FROM workouts
),
r AS (
    SELECT w.*, coalesce(p.rank, 99) AS rank
    FROM w LEFT JOIN source_priority p ON p.grp = 'workouts' AND p.kind = w.kind
)
SELECT a.* EXCLUDE (rank)
FROM r a
WHERE NOT EXISTS (
    SELECT 1 FROM r b
    WHERE b.local_day BETWEEN a.local_day - 1 AND a.local_day + 1
      AND NOT (b.source = a.source AND b.workout_id = a.workout_id)
      AND (b.rank < a.rank OR (b.rank = a.rank AND (b.source < a.source
           OR (b.source = a.source AND b.workout_id < a.workout_id))))
      AND epoch(least(a.end_ts, b.end_ts)) - epoch(greatest(a.start_ts, b.start_ts))
          > 0.5 * least(epoch(a.end_ts) - epoch(a.start_ts), epoch(b.end_ts) - epoch(b.start_ts))
)
