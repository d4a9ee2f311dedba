"""connectors.calendar.google_write against the loopback Calendar v3 server (real googleapiclient).

The calendar always holds events the person made themselves, some of which look like
Rhythm's (the same title, a shared `rhythm` property, a private one with another value):
after every push they are exactly as they were, and no write request ever names them.
"""

from __future__ import annotations

import copy
import random
import time
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from google.oauth2.credentials import Credentials

from common.errors import ApiError, AuthError
from common.rhythm_blocks import GOOGLE_ID_PREFIX, CalendarBlock, block_key, is_rhythm_event_id
from connectors.calendar import google_api, google_write
from connectors.http import RetryPolicy
from connectors.oauth import FileTokenStore
from tests.connectors.google_server import EVENTS, READONLY, GoogleServer, timed
from tests.loopback import Loopback, Reply, loopback_fixture  # noqa: F401

TZ = ZoneInfo("Europe/Berlin")
PRIMARY = "foo.bar@gmail.com"
FAMILY = "family123456789@group.calendar.google.com"
HOLIDAYS = "en.usa#holiday@group.v.calendar.google.com"
DAY = date(2025, 11, 19)
PLANNED = datetime(2025, 11, 19, 5, 50, tzinfo=UTC)
EVENTS_PATH = f"/calendars/{PRIMARY}/events"


def at(day: date, hh: int, mm: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hh, mm, tzinfo=TZ)


def blk(day: date, slot: str, start: datetime, minutes: int, action: str = "DEEP_WORK", busy: bool = False,
        planned: datetime = PLANNED, rec: int = 1) -> CalendarBlock:
    return CalendarBlock(block_key(day, slot), day, slot, start, start + timedelta(minutes=minutes),
                         f"{action.replace('_', ' ').capitalize()} (Rhythm)", f"because {action} {rec}", planned,
                         busy, action, "block", rec)


def plan(day: date = DAY) -> list[CalendarBlock]:
    return [blk(day, "morning", at(day, 9, 15), 90, rec=1), blk(day, "afternoon", at(day, 14, 0), 45, "EXERCISE", rec=2),
            blk(day, "evening", at(day, 21, 10), 60, "ME_TIME", rec=3)]


def the_persons_events(g: GoogleServer, day: date = DAY) -> dict[str, dict]:
    """Events the person made, in the same calendar, some looking like Rhythm's."""
    d = day.isoformat()
    mine = [
        timed("standup0001", f"{d}T09:00:00+01:00", f"{d}T09:15:00+01:00", tz="Europe/Berlin", summary="Team stand-up"),
        timed("lookalike01", f"{d}T09:15:00+01:00", f"{d}T10:45:00+01:00", tz="Europe/Berlin", summary="Deep work (Rhythm)",
              description="Suggested by Rhythm (recommendation #1)", transparency="transparent"),
        timed("sharedmark1", f"{d}T14:00:00+01:00", f"{d}T14:45:00+01:00", tz="Europe/Berlin", summary="Exercise (Rhythm)",
              extendedProperties={"shared": {"rhythm": "1", "rhythm_key": f"{d}-afternoon", "rhythm_day": d}}),
        timed("privateoff1", f"{d}T18:00:00+01:00", f"{d}T19:00:00+01:00", tz="Europe/Berlin", summary="Gym",
              extendedProperties={"private": {"rhythm": "0", "rhythm_key": f"{d}-evening", "rhythm_day": d}}),
        timed("nomarkday01", f"{d}T20:00:00+01:00", f"{d}T21:00:00+01:00", tz="Europe/Berlin", summary="Me time (Rhythm)",
              extendedProperties={"private": {"rhythm_key": f"{d}-evening", "rhythm_day": d}}),
    ]
    for ev in mine:
        g.put(PRIMARY, ev)
    return {ev["id"]: copy.deepcopy(ev) for ev in mine}


def writer_for(g: GoogleServer, waits: list[float] | None = None, token: str | None = None) -> google_write.GoogleCalendarWriter:
    service = google_api.build_service(g.api_base, Credentials(token=token or g.grant_write()))
    policy = RetryPolicy(max_retries=3, sleep=(waits if waits is not None else []).append, jitter=False)
    return google_write.GoogleCalendarWriter(service, policy=policy)


def rhythm_events(g: GoogleServer, cid: str = PRIMARY) -> dict[str, dict]:
    """The live events carrying Rhythm's private mark, by block key."""
    out = {}
    for ev in g.live(cid).values():
        private = (ev.get("extendedProperties") or {}).get("private") or {}
        if private.get("rhythm") == "1":
            assert private["rhythm_key"] not in out, "two events for one block"
            out[private["rhythm_key"]] = ev
    return out


def writes(srv: Loopback) -> list:
    return [r for r in srv.requests if r.method in ("POST", "PATCH", "DELETE") and "/calendar/v3/" in r.path]


def assert_untouched(g: GoogleServer, srv: Loopback, before: dict[str, dict]) -> None:
    for eid, ev in before.items():
        assert g.events[PRIMARY][eid] == ev, f"the person's event {eid} changed"
        assert not any(r.path.endswith(f"/events/{eid}") for r in writes(srv)), f"a write named {eid}"


def push(w, blocks, days=(DAY,), cid=PRIMARY, **kw):
    planned = kw.pop("planned_at", {d: PLANNED for d in days})
    return google_write.push(w, cid, list(days), blocks, planned_at=planned, zone=TZ, **kw)


# -- the push --------------------------------------------------------------------------------------
def test_push_inserts_marked_free_blocks_and_a_second_push_writes_nothing(loopback: Loopback):
    g = GoogleServer(loopback)
    before = the_persons_events(g)
    w = writer_for(g)
    result = push(w, plan())
    assert sorted(result.inserted) == sorted(b.key for b in plan()) and not result.deleted
    mine = rhythm_events(g)
    assert set(mine) == {b.key for b in plan()}
    for b in plan():
        ev = mine[b.key]
        assert ev["id"].startswith(GOOGLE_ID_PREFIX) and is_rhythm_event_id(ev["id"]) and result.events[b.key] == ev["id"]
        assert ev["summary"] == b.summary and ev["description"] == b.description
        assert ev["transparency"] == "transparent"
        assert ev["start"] == {"dateTime": b.start.isoformat(), "timeZone": "Europe/Berlin"}
        assert datetime.fromisoformat(ev["end"]["dateTime"]) == b.end
        assert ev["extendedProperties"]["private"] == {"rhythm": "1", "rhythm_key": b.key, "rhythm_day": "2025-11-19",
                                                        "rhythm_recommendation": str(b.recommendation_id)}
    inserts = [r for r in writes(loopback) if r.method == "POST"]
    assert len(inserts) == 3 and all(r.query["sendUpdates"] == "none" for r in inserts)
    listing = [r for r in loopback.requests if r.method == "GET" and r.path.endswith("/events")]
    assert listing[0].query_lists["privateExtendedProperty"] == ["rhythm=1", "rhythm_day=2025-11-19"]
    # again: found by their keys, nothing to change, no write at all
    n = len(writes(loopback))
    again = push(w, plan())
    assert again.unchanged == [b.key for b in sorted(plan(), key=lambda b: b.start)] and again.writes == 0
    assert len(writes(loopback)) == n and rhythm_events(g) == mine
    assert_untouched(g, loopback, before)


def test_a_new_plan_patches_in_place_removes_stale_blocks_and_keeps_past_ones(loopback: Loopback):
    g = GoogleServer(loopback)
    before = the_persons_events(g)
    w = writer_for(g)
    first = push(w, plan())
    ids = dict(first.events)
    # At 12:30 the plan is made again: the morning is over (its block stays as a record), the
    # afternoon block moves and becomes a nap, the evening has no room any more.
    replanned = datetime(2025, 11, 19, 11, 30, tzinfo=UTC)
    new = [blk(DAY, "afternoon", at(DAY, 15, 30), 25, "SLEEP", planned=replanned, rec=7)]
    result = push(w, new, planned_at={DAY: replanned})
    assert result.updated == [block_key(DAY, "afternoon")]
    assert result.deleted == [block_key(DAY, "evening")] and result.kept == [block_key(DAY, "morning")]
    mine = rhythm_events(g)
    assert set(mine) == {block_key(DAY, "morning"), block_key(DAY, "afternoon")}
    moved = mine[block_key(DAY, "afternoon")]
    assert moved["id"] == ids[block_key(DAY, "afternoon")]  # patched, not re-created
    assert datetime.fromisoformat(moved["start"]["dateTime"]) == at(DAY, 15, 30) and moved["summary"] == "Sleep (Rhythm)"
    assert moved["extendedProperties"]["private"]["rhythm_recommendation"] == "7"
    patch = [r for r in writes(loopback) if r.method == "PATCH"][0]
    assert set(patch.json()) <= {"summary", "description", "start", "end", "transparency", "extendedProperties"}
    assert g.events[PRIMARY][ids[block_key(DAY, "evening")]]["status"] == "cancelled"
    assert_untouched(g, loopback, before)


def test_busy_blocks_are_opaque_and_switching_back_is_one_patch_each(loopback: Loopback):
    g = GoogleServer(loopback)
    w = writer_for(g)
    push(w, [b.__class__(**{**b.__dict__, "busy": True}) for b in plan()])
    assert {ev["transparency"] for ev in rhythm_events(g).values()} == {"opaque"}
    result = push(w, plan())
    assert len(result.updated) == 3 and {ev["transparency"] for ev in rhythm_events(g).values()} == {"transparent"}
    assert all(set(r.json()) == {"transparency"} for r in writes(loopback) if r.method == "PATCH")


def test_clear_removes_only_rhythms_blocks_of_those_days(loopback: Loopback):
    g = GoogleServer(loopback)
    before = the_persons_events(g)
    w = writer_for(g)
    tomorrow = DAY + timedelta(days=1)
    push(w, plan() + plan(tomorrow), days=(DAY, tomorrow))
    push(w, plan(), cid=FAMILY)  # the same day in another calendar
    result = push(w, [], clear=True)
    assert sorted(result.deleted) == sorted(b.key for b in plan()) and not result.inserted
    assert set(rhythm_events(g)) == {b.key for b in plan(tomorrow)}
    assert set(rhythm_events(g, FAMILY)) == {b.key for b in plan()}
    assert_untouched(g, loopback, before)


def test_a_second_event_with_the_same_key_is_removed(loopback: Loopback):
    g = GoogleServer(loopback)
    w = writer_for(g)
    push(w, plan())
    copy_of = copy.deepcopy(rhythm_events(g)[block_key(DAY, "morning")])
    copy_of.update(id=GOOGLE_ID_PREFIX + "0" * 32, created="2099-01-01T00:00:00.000Z")
    g.put(PRIMARY, copy_of)
    result = push(w, plan())
    assert result.deleted == [block_key(DAY, "morning")] and g.events[PRIMARY][copy_of["id"]]["status"] == "cancelled"
    assert len(rhythm_events(g)) == 3


def test_pushes_of_random_plans_leave_exactly_the_last_plan(loopback: Loopback):
    """Generated plans over two days, pushed one after another: after each push, Rhythm's
    events are the plan's blocks (plus the ones that were over before it), and the person's
    events never change."""
    g = GoogleServer(loopback)
    days = (DAY, DAY + timedelta(days=1))
    before = {**the_persons_events(g, days[0]), **the_persons_events(g, days[1])}
    w = writer_for(g)
    rng = random.Random(23)
    hours = {"morning": 7, "afternoon": 13, "evening": 18, "night": 22}
    for round_ in range(6):
        planned = PLANNED + timedelta(hours=round_)
        blocks = []
        for d in days:
            for slot in rng.sample(list(hours), rng.randint(0, 4)):
                start = at(d, hours[slot], 5 * rng.randint(0, 11))
                blocks.append(blk(d, slot, start, rng.choice([15, 45, 90]), rng.choice(["DEEP_WORK", "LEARN", "SLEEP"]),
                                  busy=rng.random() < 0.3, planned=planned, rec=round_))
        result = push(w, blocks, days=days, planned_at=dict.fromkeys(days, planned))
        mine = rhythm_events(g)
        kept = set(result.kept)
        assert set(mine) == {b.key for b in blocks} | kept
        for b in blocks:
            ev = mine[b.key]
            assert datetime.fromisoformat(ev["start"]["dateTime"]) == b.start
            assert datetime.fromisoformat(ev["end"]["dateTime"]) == b.end
            assert ev["transparency"] == ("opaque" if b.busy else "transparent") and ev["summary"] == b.summary
        for key in kept:
            assert datetime.fromisoformat(mine[key]["end"]["dateTime"]) <= planned
        assert push(w, blocks, days=days, planned_at=dict.fromkeys(days, planned)).writes == 0  # idempotent
    assert_untouched(g, loopback, before)


# -- refusing to touch -----------------------------------------------------------------------------
def test_the_writer_refuses_events_without_rhythms_private_mark(loopback: Loopback):
    g = GoogleServer(loopback)
    before = the_persons_events(g)
    w = writer_for(g)
    for ev in before.values():
        with pytest.raises(ValueError, match="did not create"):
            w.patch(PRIMARY, ev, {"summary": "x"})
        with pytest.raises(ValueError, match="did not create"):
            w.delete(PRIMARY, ev)
    with pytest.raises(ValueError, match="only Rhythm's own"):
        w.insert(PRIMARY, {"id": "abcdefgh12", "summary": "not marked"})
    assert writes(loopback) == []


def test_a_server_that_ignores_the_filter_still_cannot_make_rhythm_touch_others(loopback: Loopback):
    g = GoogleServer(loopback)
    before = the_persons_events(g)
    everything = {"kind": "calendar#events", "items": list(copy.deepcopy(before).values())}
    loopback.route("GET", f"/calendar/v3/calendars/{PRIMARY.replace('@', '%40')}/events", Reply.json(everything))
    result = push(writer_for(g), [], clear=True)
    assert result.deleted == [] and writes(loopback) == []
    assert_untouched(g, loopback, before)


# -- failures on the write path ----------------------------------------------------------------------
def test_429_and_5xx_on_writes_are_retried(loopback: Loopback):
    g = GoogleServer(loopback)
    waits: list[float] = []
    g.faults[f"POST {EVENTS_PATH}"] = [Reply(503), Reply(429, headers={"Retry-After": "7"})]
    w = writer_for(g, waits)
    result = push(w, plan())
    assert len(result.inserted) == 3 and len(rhythm_events(g)) == 3
    assert waits == [0.5, 7.0]
    assert len([r for r in writes(loopback) if r.method == "POST"]) == 5


def test_an_insert_whose_answer_was_lost_is_not_made_twice(loopback: Loopback):
    g = GoogleServer(loopback)
    g.faults_after[f"POST {EVENTS_PATH}"] = [Reply(503)]  # the first insert lands, its answer is lost
    w = writer_for(g)
    result = push(w, plan())
    posts = [r for r in writes(loopback) if r.method == "POST"]
    assert len(posts) == 4 and posts[0].json()["id"] == posts[1].json()["id"]  # retried with the same id: 409
    assert len(rhythm_events(g)) == 3 and len(g.live(PRIMARY)) == 3
    assert result.events[block_key(DAY, "morning")] == posts[0].json()["id"]


def test_a_500_storm_is_one_api_error(loopback: Loopback):
    g = GoogleServer(loopback)
    g.faults[f"POST {EVENTS_PATH}"] = [Reply(500)] * 10
    with pytest.raises(ApiError, match="after 3 retries"):
        push(writer_for(g), plan())


def test_calendars_rhythm_may_not_write_are_clear_errors(loopback: Loopback):
    g = GoogleServer(loopback)
    with pytest.raises(AuthError, match="no write access to this calendar"):
        push(writer_for(g), plan(), cid=HOLIDAYS)  # a calendar the person may only read
    with pytest.raises(ApiError, match="not found"):
        push(writer_for(g), plan(), cid="nobody@example.org")
    with pytest.raises(AuthError, match="rhythm auth google --write"):
        push(writer_for(g, token="g-acc-0"), plan())  # a read-only token, nothing to refresh it with


# -- tokens: open_writer -----------------------------------------------------------------------------
def setting_for(g: GoogleServer):
    return {"google_api_base": g.api_base, "google_token_url": g.token_url, "google_client_id": "gid",
            "google_client_secret": "gsecret", "google_client_secrets_file": None}.get


def test_an_expired_token_is_refreshed_with_the_write_scope_and_stored(loopback: Loopback, tmp_path):
    g = GoogleServer(loopback)
    g.grant_write()
    store = FileTokenStore(tmp_path)
    store.save("google", {"access_token": "stale", "refresh_token": g.refresh_token, "expires_at": time.time() - 10,
                          "scope": f"{READONLY} {EVENTS}"})
    w = google_write.open_writer(setting_for(g), store, RetryPolicy(max_retries=2, sleep=lambda _s: None))
    result = push(w, plan())
    assert len(result.inserted) == 3
    refresh = loopback.calls("POST", "/token")
    assert len(refresh) == 1 and set(refresh[0].form["scope"].split()) == {READONLY, EVENTS}
    tok = store.load("google")
    assert tok["access_token"] in g.access_tokens and g.token_scopes[tok["access_token"]] == {READONLY, EVENTS}
    assert tok["expires_at"] > time.time() and tok["refresh_token"] == g.refresh_token


def test_a_token_a_read_only_sync_refreshed_is_refreshed_once_more_for_writing(loopback: Loopback, tmp_path):
    g = GoogleServer(loopback)
    g.grant_write()
    read_only = g.issue_access_token({READONLY})
    store = FileTokenStore(tmp_path)
    store.save("google", {"access_token": read_only, "refresh_token": g.refresh_token,
                          "expires_at": time.time() + 3000})  # no scope recorded
    w = google_write.open_writer(setting_for(g), store, RetryPolicy(max_retries=2, sleep=lambda _s: None))
    assert len(push(w, plan()).inserted) == 3
    assert len(loopback.calls("POST", "/token")) == 1
    assert g.token_scopes[store.load("google")["access_token"]] >= {EVENTS}


def test_without_the_write_grant_push_says_how_to_get_it(loopback: Loopback, tmp_path):
    g = GoogleServer(loopback)
    store = FileTokenStore(tmp_path)
    with pytest.raises(AuthError, match="not authorised yet"):
        google_write.open_writer(setting_for(g), store)
    store.save("google", {"access_token": "g-acc-0", "refresh_token": g.refresh_token, "scope": READONLY,
                          "expires_at": time.time() + 3000})
    with pytest.raises(AuthError, match=r"may read but not write your calendar; run `rhythm auth google --write`"):
        google_write.open_writer(setting_for(g), store)
    # no scope recorded and the refresh token was never granted writing: refused by the token endpoint
    store.save("google", {"access_token": "g-acc-0", "refresh_token": g.refresh_token, "expires_at": time.time() + 3000})
    w = google_write.open_writer(setting_for(g), store, RetryPolicy(max_retries=1, sleep=lambda _s: None))
    with pytest.raises(AuthError, match="rhythm auth google --write"):
        push(w, plan())
    assert [r.method for r in writes(loopback)] == ["POST"] and rhythm_events(g) == {}  # refused (403), then stopped


# -- the marks ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("event_id,ours", [
    ("rhythm-2025-11-19-morning@rhythm.local", True),  # an exported block
    ("rhythm-2025-11-19-morning@rhythm.local/2025-11-19T08:00:00Z", True),  # as an occurrence key
    (GOOGLE_ID_PREFIX + "0123456789abcdef0123456789abcdef", True),  # a pushed block, synced
    (GOOGLE_ID_PREFIX + "0123456789abcdef0123456789abcdef@google.com", True),  # ... in a Google .ics export
    ("7kq2l1a0bcd@google.com", False), ("standup@busy.week", False), ("rhythm.local", False),
    ("x@rhythm.local.example.org", False), ("", False), (None, False),
])
def test_which_ids_are_rhythms(event_id, ours):
    assert is_rhythm_event_id(event_id) is ours


def test_only_the_private_mark_makes_a_google_event_rhythms():
    from common.rhythm_blocks import is_rhythm_google_event

    assert is_rhythm_google_event({"extendedProperties": {"private": {"rhythm": "1"}}})
    for ev in ({"summary": "Deep work (Rhythm)"}, {"extendedProperties": {"shared": {"rhythm": "1"}}},
               {"extendedProperties": {"private": {"rhythm": "0"}}}, {"extendedProperties": {"private": {"rhythm": 1}}},
               {"extendedProperties": None}, {"id": GOOGLE_ID_PREFIX + "0" * 32}):
        assert not is_rhythm_google_event(ev)
