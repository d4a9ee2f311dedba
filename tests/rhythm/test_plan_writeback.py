"""The plan in the calendar, through the real product: the busy week's person (tests.rhythm.
busy_week), `rhythm plan export --ics`, `rhythm plan push google` against the loopback
Calendar v3 server, `rhythm auth google --write`, and the daemon's push after its plan.

What must hold: Rhythm's blocks read back (an imported export, a synced push, even marked
busy) are never commitments, never fix a slot and never count as something the person did;
re-export and re-push update in place; the person's own events are never touched.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta

import httpx
import icalendar
import pytest

from common.errors import AuthError
from connectors.http import RetryPolicy
from connectors.oauth import FileTokenStore
from lab.people.busy_week import TZ, WEDNESDAY, wearable_records, write_ics
from rhythm import daemon, jobs
from rhythm import sync as sync_mod
from rhythm.plan_export import export_ics
from rhythm.settings import load_settings
from storage import open_db
from storage.writer import write_records
from tests.connectors.google_server import EVENTS, READONLY, GoogleServer, timed
from tests.loopback import Loopback

NOW = datetime(2025, 11, 19, 6, 50, tzinfo=TZ)
PRIMARY = "foo.bar@gmail.com"
DAY = WEDNESDAY.isoformat()


@pytest.fixture
def person(rhythm_home, tmp_path, monkeypatch):
    monkeypatch.setenv("RHYTHM_TIMEZONE", "Europe/Berlin")
    settings = load_settings()
    with open_db(settings.database) as db:
        write_records(db, wearable_records(WEDNESDAY + timedelta(days=1)))
    jobs.import_file(settings, "ics", write_ics(tmp_path))
    jobs.map_data(settings, now=NOW + timedelta(days=1))
    return settings


@pytest.fixture
def google(person, monkeypatch):
    """A loopback Google Calendar holding the person's own events, and write access granted."""
    monkeypatch.setattr(sync_mod, "default_policy", lambda: RetryPolicy(max_retries=2, sleep=lambda _s: None, jitter=False))
    with Loopback() as srv:
        g = GoogleServer(srv)
        for k, v in {"RHYTHM_GOOGLE_API_BASE": g.api_base, "RHYTHM_GOOGLE_TOKEN_URL": g.token_url,
                     "RHYTHM_GOOGLE_AUTH_URL": g.auth_url, "RHYTHM_GOOGLE_CLIENT_ID": "gid",
                     "RHYTHM_GOOGLE_CLIENT_SECRET": "gsecret"}.items():
            monkeypatch.setenv(k, v)
        access = g.grant_write()
        FileTokenStore(person.tokens_dir).save("google", {
            "access_token": access, "refresh_token": g.refresh_token, "expires_at": time.time() + 3000,
            "scope": f"{READONLY} {EVENTS}"})
        g.put(PRIMARY, timed("lookalike01", f"{DAY}T07:15:00+01:00", f"{DAY}T08:00:00+01:00", tz="Europe/Berlin",
                             summary="Exercise (Rhythm)"))  # the person's, whatever its title says
        g.put(PRIMARY, timed("dentist0001", f"{DAY}T18:00:00+01:00", f"{DAY}T18:30:00+01:00", tz="Europe/Berlin",
                             summary="Dentist"))
        yield g, load_settings()


def q(settings, sql: str, params=None) -> list[tuple]:
    with open_db(settings.database, read_only=True) as db:
        return db.query(sql, params)[1]


def mapped(settings) -> dict[str, list]:
    """Everything `rhythm map` derives, to compare before and after."""
    with open_db(settings.database, read_only=True) as db:
        return {t: db.query(f"SELECT * EXCLUDE (computed_at) FROM {t} ORDER BY ALL")[1] for t in ("meters", "slot_actions")}


def plan_shape(plan) -> dict:
    return {"commitments": plan.commitments, "fixed": plan.fixed_slots,
            "blocks": [(s.slot, s.action, s.kind, s.start, s.end) for s in plan.slots]}


def rhythm_events(g: GoogleServer) -> dict[str, dict]:
    return {e["extendedProperties"]["private"]["rhythm_key"]: e for e in g.live(PRIMARY).values()
            if ((e.get("extendedProperties") or {}).get("private") or {}).get("rhythm") == "1"}


# -- export ------------------------------------------------------------------------------------------
def test_an_exported_plan_imported_again_is_no_commitment_and_changes_nothing(person, tmp_path):
    first = jobs.recommend(person, WEDNESDAY, now=NOW)
    before = mapped(person)
    path = tmp_path / "plan.ics"
    out = export_ics(person, path, WEDNESDAY, busy=True, plan=jobs.recommend, now=NOW)  # busy: the hard case
    assert out["planned"] == [] and [e["recommendation"] for e in out["events"]] == [s.id for s in first.slots]
    jobs.import_file(person, "ics", path)
    jobs.map_data(person, now=NOW + timedelta(days=1))
    stored = q(person, "SELECT event_id, transparency FROM events WHERE calendar_id = 'Rhythm' ORDER BY start_ts")
    assert [e for e, _ in stored] == [f"rhythm-{DAY}-{s.slot}@rhythm.local" for s in first.slots]
    assert {t for _, t in stored} == {"opaque"}
    second = jobs.recommend(person, WEDNESDAY, now=NOW)
    assert plan_shape(second) == plan_shape(first)  # no block became a commitment or fixed a slot
    assert mapped(person) == before  # nor something the person did

    # The control: the same events without Rhythm's marks are the person's own, and they do count.
    text = path.read_text().replace("@rhythm.local", "@example.org").replace("X-WR-CALNAME:Rhythm", "X-WR-CALNAME:Mine")
    (tmp_path / "mine.ics").write_text(text)
    jobs.import_file(person, "ics", tmp_path / "mine.ics")
    third = jobs.recommend(person, WEDNESDAY, now=NOW)
    titles = {c["title"] for c in third.commitments}
    assert {e["summary"] for e in out["events"]} <= titles and plan_shape(third) != plan_shape(first)


def test_re_export_updates_the_same_uids_and_plans_a_day_first_when_none_is_stored(person, tmp_path):
    path = tmp_path / "plan.ics"
    runs_before = q(person, "SELECT count(*) FROM runs")[0][0]
    out = export_ics(person, path, WEDNESDAY, 2, plan=jobs.recommend, now=NOW)
    assert out["planned"] == [DAY, (WEDNESDAY + timedelta(days=1)).isoformat()]
    assert q(person, "SELECT kind, target, ok FROM runs ORDER BY id")[runs_before:] == [
        ("recommend", DAY, True), ("recommend", out["planned"][1], True)]  # planning is recorded; the export is not
    data = path.read_bytes()
    assert export_ics(person, path, WEDNESDAY, 2, plan=jobs.recommend, now=NOW)["planned"] == [] and path.read_bytes() == data
    assert q(person, "SELECT count(*) FROM runs")[0][0] == runs_before + 2
    cal = icalendar.Calendar.from_ical(data)
    uids = [str(e["UID"]) for e in cal.walk("VEVENT")]
    assert len(uids) == len(set(uids)) == len(out["events"]) and all(u.endswith("@rhythm.local") for u in uids)
    assert {str(e["TRANSP"]) for e in cal.walk("VEVENT")} == {"TRANSPARENT"}
    # a new plan for Wednesday: the same UIDs for the same slots, newer SEQUENCE (whole seconds)
    time.sleep(1.05)
    jobs.recommend(person, WEDNESDAY, now=NOW + timedelta(hours=5))
    export_ics(person, path, WEDNESDAY, 2, plan=jobs.recommend, now=NOW)
    again = {str(e["UID"]): e for e in icalendar.Calendar.from_ical(path.read_bytes()).walk("VEVENT")}
    old = {str(e["UID"]): e for e in cal.walk("VEVENT")}
    wed = [u for u in again if DAY in u]
    assert wed and all(int(again[u]["SEQUENCE"]) > int(old[u]["SEQUENCE"]) for u in wed if u in old)
    (tmp_path / "first.ics").write_bytes(data)
    jobs.import_file(person, "ics", tmp_path / "first.ics")  # importing both files never duplicates a block
    jobs.import_file(person, "ics", path)
    assert q(person, "SELECT count(*), count(DISTINCT event_id) FROM events WHERE calendar_id = 'Rhythm'")[0] == (
        len(set(uids) | set(again)),) * 2


def test_export_through_the_cli_and_its_bad_input(person, tmp_path, run_cli):
    jobs.recommend(person, WEDNESDAY, now=NOW)
    path = tmp_path / "out.ics"
    code, out, err = run_cli("plan", "export", "--ics", path, "--date", DAY, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["path"] == str(path) and path.exists() and result["events"]
    code, out, err = run_cli("plan", "export", "--ics", path, "--date", DAY)
    assert code == 0, err
    assert f"wrote {len(result['events'])} blocks (free) to" in out and "Bedtime (Rhythm)" in out
    counts = q(person, "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM recommendations)")
    for args, line in [
        (["--ics", path, "--days", "0"], "error: --days: expected 1 to 14, got 0"),
        (["--ics", tmp_path / "nowhere" / "x.ics"], "no such folder"),
        (["--ics", tmp_path], "is a folder"),
    ]:
        code, out, err = run_cli("plan", "export", *args)
        assert code != 0 and line in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run_cli("plan", "export", "--ics", path, "--date", "2025-13-01")
    assert code == 2 and "is not a date" in err
    assert q(person, "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM recommendations)") == counts


# -- push ---------------------------------------------------------------------------------------------
def test_push_is_idempotent_recorded_and_never_touches_the_persons_events(google, run_cli):
    g, settings = google
    theirs = {i: dict(e) for i, e in g.live(PRIMARY).items()}
    plan = jobs.recommend(settings, WEDNESDAY, now=NOW)
    code, out, err = run_cli("plan", "push", "google", "--date", DAY, "--json")
    assert code == 0, err
    first = json.loads(out)
    assert sorted(first["inserted"]) == sorted(f"{DAY}-{s.slot}" for s in plan.slots) and first["planned"] == []
    mine = rhythm_events(g)
    assert {k: (e["start"]["dateTime"], e["transparency"]) for k, e in mine.items()} == {
        f"{DAY}-{s.slot}": (s.start.isoformat(), "transparent") for s in plan.slots}
    assert all(e["extendedProperties"]["private"]["rhythm_recommendation"] == str(s.id)
               for s in plan.slots for e in [mine[f"{DAY}-{s.slot}"]])
    n = len(g.srv.requests)
    code, out, err = run_cli("plan", "push", "google", "--date", DAY)
    assert code == 0, err
    assert f"0 added, 0 updated, {len(plan.slots)} unchanged, 0 removed" in out
    assert not any(r.method in ("POST", "PATCH", "DELETE") for r in g.srv.requests[n:])
    code, out, err = run_cli("plan", "push", "google", "--date", DAY, "--busy", "--json")
    assert code == 0 and len(json.loads(out)["updated"]) == len(plan.slots)
    assert {e["transparency"] for e in rhythm_events(g).values()} == {"opaque"}
    runs = q(settings, "SELECT kind, source, target, ok, summary FROM runs WHERE kind = 'push' ORDER BY id")
    assert [r[:4] for r in runs] == [("push", "google", "primary", True)] * 3
    assert json.loads(runs[0][4])["inserted"] == first["inserted"]
    code, out, err = run_cli("plan", "push", "google", "--date", DAY, "--clear")
    assert code == 0 and f"{len(plan.slots)} removed" in out
    assert rhythm_events(g) == {}
    assert {i: e for i, e in g.events[PRIMARY].items() if i in theirs} == theirs


def test_busy_blocks_synced_back_from_google_are_no_commitments(google):
    g, settings = google
    first = jobs.recommend(settings, WEDNESDAY, now=NOW)
    before = mapped(settings)
    result = jobs.push_google(settings, WEDNESDAY, busy=True, now=NOW)
    assert len(result["inserted"]) == len(first.slots)
    assert jobs.sync(settings, ["google"])["ok"]
    jobs.map_data(settings, now=NOW + timedelta(days=1))
    synced = q(settings, "SELECT event_id, transparency FROM events WHERE source = 'google' AND title LIKE '%(Rhythm)'"
                         " AND event_id LIKE 'rhmblock%'")
    assert len(synced) == len(first.slots) and {t for _, t in synced} == {"opaque"}
    again = jobs.recommend(settings, WEDNESDAY, now=NOW)
    # the person's own "Exercise (Rhythm)" and dentist are commitments; Rhythm's blocks are not
    titles = sorted(c["title"] for c in again.commitments)
    assert "Dentist" in titles and titles.count("Exercise (Rhythm)") == 1
    assert len(again.commitments) == len(first.commitments) + 2
    assert mapped(settings) != before  # the person's two events count ...
    pushed = jobs.push_google(settings, WEDNESDAY, busy=True, now=NOW)  # ... and the plan moved around them
    mine = rhythm_events(g)
    assert set(mine) == {f"{DAY}-{s.slot}" for s in again.slots} | set(pushed["kept"])
    assert all(datetime.fromisoformat(mine[f"{DAY}-{s.slot}"]["start"]["dateTime"]) == s.start for s in again.slots)


def test_push_without_write_access_is_one_line_and_leaves_everything(google, run_cli):
    g, settings = google
    FileTokenStore(settings.tokens_dir).save("google", {"access_token": "g-acc-0", "refresh_token": g.refresh_token,
                                                        "expires_at": time.time() + 3000, "scope": READONLY})
    counts = q(settings, "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM recommendations)")
    code, out, err = run_cli("plan", "push", "google", "--date", DAY)
    assert code == 1 and "rhythm auth google --write" in err and len(err.strip().splitlines()) == 1
    assert q(settings, "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM recommendations)") == counts
    code, out, err = run_cli("plan", "push", "google", "--date", DAY, "--calendar", "en.usa#holiday@group.v.calendar.google.com")
    assert code == 1 and "rhythm auth google --write" in err  # checked before anything is planned
    assert not any(r.method in ("POST", "PATCH", "DELETE") for r in g.srv.requests)


# -- auth ---------------------------------------------------------------------------------------------
def _browser(url: str) -> None:
    """The person: opens the consent page (the loopback server) and follows its redirect."""
    threading.Thread(target=lambda: httpx.get(url, follow_redirects=True, timeout=10), daemon=True).start()


@pytest.fixture
def plain_http_consent(monkeypatch):
    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")  # the loopback consent page is http://127.0.0.1


def test_auth_google_write_asks_for_the_events_scope(google, plain_http_consent):
    g, settings = google
    FileTokenStore(settings.tokens_dir).delete("google")
    result = sync_mod.auth_google(settings, open_browser=False, on_url=_browser, timeout_s=10, write=True)
    asked = [r for r in g.srv.requests if r.path == "/o/oauth2/auth"][-1].query["scope"].split()
    assert set(asked) == {READONLY, EVENTS} and result["write"] is True
    tok = FileTokenStore(settings.tokens_dir).load("google")
    assert set(tok["scope"].split()) == {READONLY, EVENTS} and tok["refresh_token"] == g.refresh_token
    jobs.recommend(settings, WEDNESDAY, now=NOW)
    assert jobs.push_google(settings, WEDNESDAY)["inserted"]  # the stored grant writes
    # read-only by default; the google_write setting asks for writing too
    sync_mod.auth_google(settings, open_browser=False, on_url=_browser, timeout_s=10)
    assert [r for r in g.srv.requests if r.path == "/o/oauth2/auth"][-1].query["scope"] == READONLY
    sync_mod.auth_google(load_settings(google_write=True), open_browser=False, on_url=_browser, timeout_s=10)
    assert EVENTS in [r for r in g.srv.requests if r.path == "/o/oauth2/auth"][-1].query["scope"].split()


def test_auth_google_write_when_the_person_unticks_writing(google, plain_http_consent):
    g, settings = google
    g.consent = {READONLY}
    g.granted_scopes = set()
    with pytest.raises(AuthError, match="write access was not granted"):
        sync_mod.auth_google(settings, open_browser=False, on_url=_browser, timeout_s=10, write=True)
    assert FileTokenStore(settings.tokens_dir).load("google")["scope"] == READONLY  # reading still works
    with pytest.raises(AuthError, match="rhythm auth google --write"):
        jobs.push_google(settings, WEDNESDAY)


# -- the daemon ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_morning_run_pushes_only_when_asked(google, monkeypatch):
    g, settings = google
    results = daemon.run_cycle(settings, sources=[], day=WEDNESDAY)
    assert [r.job for r in results] == ["map", "recommend"] and rhythm_events(g) == {}
    monkeypatch.setenv("RHYTHM_PUSH_GOOGLE_AFTER_PLAN", "true")
    monkeypatch.setenv("RHYTHM_PUSH_BUSY", "true")
    on = load_settings()
    results = daemon.run_cycle(on, sources=[], day=WEDNESDAY)
    assert [(r.job, r.stage, r.ok) for r in results] == [
        ("map", "map", True), ("recommend", "recommend", True), ("push:google", "push", True)]
    plan = results[1].plan
    assert set(rhythm_events(g)) == {f"{DAY}-{s.slot}" for s in plan.slots}
    assert {e["transparency"] for e in rhythm_events(g).values()} == {"opaque"}
    assert results[2].detail["inserted"] and q(on, "SELECT count(*) FROM runs WHERE kind = 'push' AND ok")[0][0] == 1
    # a push that fails is recorded, and the plan before it stands
    FileTokenStore(on.tokens_dir).save("google", {"access_token": "g-acc-0", "scope": READONLY})
    results = daemon.run_cycle(on, sources=[], day=WEDNESDAY)
    assert [(r.job, r.ok) for r in results] == [("map", True), ("recommend", True), ("push:google", False)]
    assert "rhythm auth google --write" in results[2].error
    assert q(on, "SELECT source, ok FROM runs WHERE kind = 'push' ORDER BY id") == [("google", True), ("google", False)]


def test_the_push_settings_are_off_by_default(rhythm_home):
    s = load_settings()
    assert (s.push_google_after_plan, s.push_calendar_id, s.push_busy, s.google_write) == (False, "primary", False, False)


def test_a_re_made_plan_is_patched_in_place_and_blocks_already_over_stay(google):
    """The plan made again at noon: blocks of the slots it still plans keep their events
    (patched), a dropped block that was over when the plan was made stays as a record (here
    all of Wednesday 19 November 2025 is over), nothing is duplicated."""
    g, settings = google
    morning = jobs.recommend(settings, WEDNESDAY, now=NOW)
    ids = jobs.push_google(settings, WEDNESDAY, now=NOW)["events"]
    later = jobs.recommend(settings, WEDNESDAY, now=datetime(2025, 11, 19, 12, 5, tzinfo=TZ))
    result = jobs.push_google(settings, WEDNESDAY)
    keys_now = {f"{DAY}-{s.slot}" for s in later.slots}
    assert {k: v for k, v in result["events"].items()} == {k: ids.get(k, result["events"][k]) for k in keys_now}
    assert set(result["kept"]) == {f"{DAY}-{s.slot}" for s in morning.slots} - keys_now
    assert set(rhythm_events(g)) == keys_now | set(result["kept"]) and not result["deleted"]
    assert len(g.live(PRIMARY)) == len(rhythm_events(g)) + 2  # and the person's two events
