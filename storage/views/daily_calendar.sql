-- One row per local_day: calendar load (confirmed, timed, not declined events).
SELECT
    local_day,
    count(*) FILTER (WHERE NOT all_day) AS timed_events,
    count(*) FILTER (WHERE all_day) AS all_day_events,
    sum(date_diff('minute', start_ts, end_ts)) FILTER (WHERE NOT all_day) AS busy_min,
    sum(coalesce(attendees_count, 0)) FILTER (WHERE NOT all_day) AS attendees
FROM events
WHERE status <> 'cancelled' AND coalesce(self_response, '') <> 'declined'
GROUP BY local_day
