"""connectors.calendar.google_api against a loopback Calendar v3 server (real googleapiclient)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime

import pytest
from google.oauth2.credentials import Credentials

from common.errors import ApiError
from common.records import Deletion, Event, RawRecord, Skipped
from connectors.calendar import google_api
from connectors.checkpoint import Checkpoint
from connectors.http import RetryPolicy
from tests.connectors.google_server import GoogleServer, all_day, calendar_list, timed
from tests.loopback import Loopback, Reply, loopback_fixture  # noqa: F401

NOW = datetime(2026, 6, 1, tzinfo=UTC)
WINDOW = datetime(2024, 6, 1, tzinfo=UTC)
PRIMARY = "foo.bar@gmail.com"
FAMILY = "family123456789@group.calendar.google.com"


def client(g: GoogleServer, waits: list[float] | None = None) -> google_api.GoogleCalendarClient:
    service = google_api.build_service(g.api_base, Credentials(token="g-acc-0"))
    policy = RetryPolicy(max_retries=3, sleep=(waits if waits is not None else []).append, jitter=False)
    return google_api.GoogleCalendarClient(service, policy=policy)


def of(records, cls):
    return [r for r in records if isinstance(r, cls)]


def test_timed_event_keeps_its_zone_and_local_day():
    ev = timed("a", "2026-05-01T23:30:00-07:00", "2026-05-02T00:30:00-07:00",
               attendees=[{"email": "me@x", "self": True, "responseStatus": "declined"},
                          {"email": "bob@x", "responseStatus": "accepted"},
                          {"email": "room@x", "resource": True}],
               recurringEventId="series1", transparency="opaque")
    raw, e = list(google_api.map_event(ev, PRIMARY, "America/Los_Angeles", NOW))
    assert raw.source == "calendar" and raw.kind == f"google_event:{PRIMARY}" and raw.natural_key == "a"
    assert isinstance(e, Event) and e.source == "google" and not e.all_day
    assert e.start_ts == datetime(2026, 5, 2, 6, 30, tzinfo=UTC)
    assert e.local_day == date(2026, 5, 1)  # 23:30 in Los Angeles
    assert e.timezone == "America/Los_Angeles"
    assert e.attendees_count == 1 and e.self_response == "declined"  # rooms and self not counted
    assert e.recurring_event_id == "series1"


def test_all_day_event_end_is_exclusive_in_the_calendar_zone():
    ev = all_day("h", "2026-07-03", "2026-07-05")
    _, e = list(google_api.map_event(ev, PRIMARY, "America/Los_Angeles", NOW))
    assert e.all_day and e.local_day == date(2026, 7, 3)
    assert e.start_ts == datetime(2026, 7, 3, 7, 0, tzinfo=UTC)  # midnight PDT
    assert e.end_ts == datetime(2026, 7, 5, 7, 0, tzinfo=UTC)  # two days, end exclusive
    assert e.transparency == "transparent"


def test_cancelled_event_becomes_deletions():
    out = list(google_api.map_event({"id": "x", "status": "cancelled"}, PRIMARY, None, NOW))
    assert Deletion("events", {"source": "google", "calendar_id": PRIMARY, "event_id": "x"}) in out
    assert Deletion("events", {"source": "google", "calendar_id": PRIMARY, "recurring_event_id": "x"}) in out
    assert Deletion("raw_calendar", {"kind": f"google_event:{PRIMARY}", "natural_key": "x"}) in out
    inst = list(google_api.map_event({"id": "x_1", "status": "cancelled", "recurringEventId": "x"}, PRIMARY, None, NOW))
    assert len(of(inst, Deletion)) == 2  # just the instance (and its raw row)


def test_selected_calendars_from_the_recorded_calendar_list():
    ids = [c["id"] for c in google_api.selected(calendar_list()["items"])]
    assert ids == [PRIMARY, FAMILY, "en.usa#holiday@group.v.calendar.google.com"]  # not foo.baz


def test_full_sync_pages_and_takes_the_sync_token_from_the_last_page(loopback: Loopback):
    g = GoogleServer(loopback)
    for i in range(8):
        g.put(PRIMARY, timed(f"e{i}", f"2026-05-0{i + 1}T09:00:00-07:00", f"2026-05-0{i + 1}T10:00:00-07:00"))
    c = client(g)
    out = list(google_api.fetch_calendar({"id": PRIMARY, "timeZone": "America/Los_Angeles"}, None, c, window_start=WINDOW, fetched_at=NOW))
    calls = loopback.calls("GET", "/calendar/v3/calendars/foo.bar%40gmail.com/events")
    assert [r.query.get("pageToken") for r in calls] == [None, "3", "6"]
    assert all(r.query["timeMin"] == "2024-06-01T00:00:00Z" and r.query["singleEvents"] == "true" for r in calls)
    assert len(of(out, Event)) == 8
    assert isinstance(out[-1], Checkpoint) and out[-1].stream == PRIMARY
    assert out[-1].cursor in g.issued_tokens  # the token only the last page carried
    # Incremental: only changes, with syncToken and without timeMin.
    g.put(PRIMARY, timed("e1", "2026-05-02T11:00:00-07:00", "2026-05-02T12:00:00-07:00"))
    g.cancel(PRIMARY, "e2")
    out2 = list(google_api.fetch_calendar({"id": PRIMARY}, out[-1].cursor, c, window_start=WINDOW, fetched_at=NOW))
    last = loopback.calls("GET", "/calendar/v3/calendars/foo.bar%40gmail.com/events")[-1]
    assert last.query["syncToken"] == out[-1].cursor and "timeMin" not in last.query
    assert [e.event_id for e in of(out2, Event)] == ["e1"]
    assert Deletion("events", {"source": "google", "calendar_id": PRIMARY, "event_id": "e2"}) in out2


def test_410_wipes_the_calendar_then_syncs_fully(loopback: Loopback):
    g = GoogleServer(loopback)
    g.put(FAMILY, all_day("d1", "2026-05-04", "2026-05-05"))
    c = client(g)
    first = list(google_api.fetch_calendar({"id": FAMILY, "timeZone": "UTC"}, None, c, window_start=WINDOW, fetched_at=NOW))
    g.expire_sync_tokens()
    out = list(google_api.fetch_calendar({"id": FAMILY, "timeZone": "UTC"}, first[-1].cursor, c, window_start=WINDOW, fetched_at=NOW))
    assert out[0] == Deletion("events", {"source": "google", "calendar_id": FAMILY})
    assert out[1] == Deletion("raw_calendar", {"kind": f"google_event:{FAMILY}"})
    assert [e.event_id for e in of(out, Event)] == ["d1"]
    assert out[-1].cursor not in g.expired_tokens


def test_5xx_and_429_are_retried_through_googleapiclient(loopback: Loopback):
    g = GoogleServer(loopback)
    g.faults["/users/me/calendarList"] = [Reply(503), Reply(429, headers={"Retry-After": "4"})]
    waits: list[float] = []
    cals = client(g, waits).calendars()
    assert len(cals) == 4
    assert waits[1] == 4.0 and len(waits) == 2


def test_500_storm_is_an_api_error(loopback: Loopback):
    g = GoogleServer(loopback)
    g.faults["/users/me/calendarList"] = [Reply(500)] * 10
    with pytest.raises(ApiError, match="after 3 retries"):
        client(g).calendars()
    assert len(loopback.calls("GET", "/calendar/v3/users/me/calendarList")) == 4


def test_raw_payload_kept(loopback: Loopback):
    g = GoogleServer(loopback)
    g.put(PRIMARY, timed("only", "2026-05-01T09:00:00Z", "2026-05-01T10:00:00Z", tz="UTC"))
    out = list(google_api.fetch({}, client(g), window_start=WINDOW, now=NOW))
    raws = of(out, RawRecord)
    assert [r.natural_key for r in raws] == ["only"]
    assert {cp.stream for cp in of(out, Checkpoint)} == {PRIMARY, FAMILY, "en.usa#holiday@group.v.calendar.google.com"}


def _events_body(g: GoogleServer, cid: str) -> Reply:
    """What the server answers for a full listing of `cid` right now (one page)."""
    return Reply.json({"kind": "calendar#events", "timeZone": "UTC", "items": list(g.events.get(cid, {}).values()),
                       "nextSyncToken": "tok-cut"})


def test_a_body_cut_mid_response_is_retried_like_other_transient_errors(loopback: Loopback):
    g = GoogleServer(loopback)
    for i in range(5):
        g.put(PRIMARY, timed(f"c{i}", f"2026-05-0{i + 1}T09:00:00Z", f"2026-05-0{i + 1}T10:00:00Z", tz="UTC"))
    path = "/calendars/foo.bar@gmail.com/events"
    body = _events_body(g, PRIMARY)
    g.faults[path] = [Reply.cut(body, len(body.body) // 2), Reply.cut(body, 10)]
    waits: list[float] = []
    out = list(google_api.fetch_calendar({"id": PRIMARY}, None, client(g, waits), window_start=WINDOW, fetched_at=NOW))
    assert sorted(e.event_id for e in of(out, Event)) == [f"c{i}" for i in range(5)]
    assert len(waits) == 2  # two cut bodies, two backoffs, then the whole listing


def test_bodies_cut_beyond_the_retry_budget_say_so_in_one_line(loopback: Loopback):
    g = GoogleServer(loopback)
    g.put(PRIMARY, timed("c0", "2026-05-01T09:00:00Z", "2026-05-01T10:00:00Z", tz="UTC"))
    body = _events_body(g, PRIMARY)
    g.faults["/calendars/foo.bar@gmail.com/events"] = [Reply.cut(body, 7)] * 10
    with pytest.raises(ApiError) as err:
        list(google_api.fetch_calendar({"id": PRIMARY}, None, client(g), window_start=WINDOW, fetched_at=NOW))
    assert "connection dropped mid-response" in str(err.value) and "\n" not in str(err.value)


def test_events_that_cannot_be_stored_are_skipped_and_counted(loopback: Loopback):
    g = GoogleServer(loopback)
    g.put(PRIMARY, timed("ok", "2026-05-01T09:00:00Z", "2026-05-01T10:00:00Z", tz="UTC"))
    g.put(PRIMARY, timed("backwards", "2026-05-02T10:00:00Z", "2026-05-02T09:00:00Z", tz="UTC"))
    g.put(PRIMARY, timed("far", "9999-12-31T09:00:00Z", "9999-12-31T10:00:00Z", tz="UTC"))
    g.put(PRIMARY, timed("early", "0001-01-01T00:00:00+14:00", "0001-01-01T01:00:00+14:00", tz="UTC"))
    g.put(PRIMARY, {**timed("odd", "2026-05-03T09:00:00Z", "2026-05-03T10:00:00Z", tz="UTC"), "start": {"date": "2026-05-03", "timeZone": 5}})
    g.put(PRIMARY, {**timed("no start", "2026-05-03T09:00:00Z", "2026-05-03T10:00:00Z", tz="UTC"), "start": {"date": "May 3"}})
    out = list(google_api.fetch({}, client(g), window_start=WINDOW, now=NOW))
    assert [e.event_id for e in of(out, Event)] == ["ok"]
    skipped = Counter(s.reason for s in of(out, Skipped))
    assert skipped == {"end before start": 1, "timestamp outside 1900-01-01 .. 2100-12-31": 2, "unreadable record": 2}
