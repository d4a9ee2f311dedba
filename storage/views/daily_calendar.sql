-- One row per local_day: calendar load (confirmed, timed, not declined events; Rhythm's own
-- blocks written back into a calendar are plans, not load: common/rhythm_blocks.py).
SELECT
    local_day,
    count(*) FILTER (WHERE NOT all_day) AS timed_events,
    count(*) FILTER (WHERE all_day) AS all_day_events,
    sum(date_diff('minute', start_ts, end_ts)) FILTER (WHERE NOT all_day) AS busy_min,
    sum(coalesce(attendees_count, 0)) FILTER (WHERE NOT all_day) AS attendees
FROM events
WHERE status <> 'cancelled' AND coalesce(self_response, '') <> 'declined'
  AND NOT (split_part(event_id, '/', 1) LIKE '%@rhythm.local' OR event_id LIKE 'rhmblock%')
GROUP BY local_day
