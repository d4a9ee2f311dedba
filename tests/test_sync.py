"""rhythm.sync and `rhythm sync`/`rhythm auth` end to end against loopback WHOOP and Google servers.

Every scenario asserts what is in the database afterwards: rows, cursors in sync_state,
errors, and that a failed or interrupted sync left nothing half-written.
"""

from __future__ import annotations

import stat
import threading
import time
from datetime import UTC, datetime

import httpx
import pytest

from connectors.http import RetryPolicy
from connectors.oauth import FileTokenStore
from rhythm import sync as sync_mod
from rhythm.jobs import sync
from rhythm.settings import load_settings
from rhythm.sync import auth_whoop
from storage import open_db
from tests.connectors.google_server import GoogleServer, all_day, timed
from tests.connectors.whoop_server import WhoopServer, make_days, score_pending, sleep_template
from tests.loopback import Loopback, Reply

PRIMARY = "foo.bar@gmail.com"
FAMILY = "family123456789@group.calendar.google.com"
FIRST_NIGHT = datetime(2026, 3, 1, 3, 0, tzinfo=UTC)


@pytest.fixture
def servers():
    with Loopback() as w, Loopback() as g:
        yield WhoopServer(w), GoogleServer(g)


@pytest.fixture
def waits(monkeypatch):
    """Every retry wait the sync asks for, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(sync_mod, "default_policy", lambda: RetryPolicy(max_retries=3, sleep=recorded.append, jitter=False))
    return recorded


@pytest.fixture
def env(rhythm_home, servers, monkeypatch, waits):
    ws, gs = servers
    values = {
        "RHYTHM_WHOOP_API_BASE": ws.api_base,
        "RHYTHM_WHOOP_TOKEN_URL": ws.token_url,
        "RHYTHM_WHOOP_AUTH_URL": ws.auth_url,
        "RHYTHM_WHOOP_CLIENT_ID": "cid",
        "RHYTHM_WHOOP_CLIENT_SECRET": "csecret",
        "RHYTHM_GOOGLE_API_BASE": gs.api_base,
        "RHYTHM_GOOGLE_TOKEN_URL": gs.token_url,
        "RHYTHM_GOOGLE_CLIENT_ID": "gid",
        "RHYTHM_GOOGLE_CLIENT_SECRET": "gsecret",
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return load_settings()


def seed_whoop(settings, ws: WhoopServer, expires_in: float = 3000) -> dict:
    tok = ws.issue_tokens()
    tok["expires_at"] = time.time() + expires_in
    FileTokenStore(settings.tokens_dir).save("whoop", tok)
    return tok


def seed_google(settings, gs: GoogleServer, expired: bool = False) -> None:
    FileTokenStore(settings.tokens_dir).save("google", {
        "access_token": "stale" if expired else "g-acc-0",
        "refresh_token": gs.refresh_token,
        "expires_at": time.time() + (-10 if expired else 3000),
    })


def q(settings, sql: str, params=None) -> list[tuple]:
    with open_db(settings.database, read_only=True) as db:
        return db.query(sql, params)[1]


def counts(settings) -> dict[str, int]:
    with open_db(settings.database, read_only=True) as db:
        c = db.row_counts()
    return {k: v for k, v in c.items() if k not in ("runs", "schema_migrations", "sync_state")}


def cursors(settings, source: str) -> dict[str, str | None]:
    return dict(q(settings, "SELECT stream, cursor FROM sync_state WHERE source = ?", [source]))


def snapshot(settings) -> dict[str, list]:
    """Every data row, without the columns that record *when* it was fetched."""
    with open_db(settings.database, read_only=True) as db:
        return {t: db.query(f"SELECT {cols} FROM {t} ORDER BY ALL")[1] for t, cols in SNAPSHOT.items()}


SNAPSHOT = {
    "raw_whoop": "kind, natural_key, payload",
    "raw_calendar": "kind, natural_key, payload",
    "samples": "source, metric, start_ts, end_ts, value, local_day, detail",
    "sleep_sessions": "session_id, start_ts, end_ts, sleep_min, score",
    "workouts": "workout_id, energy_kcal, strain",
    "events": "source, calendar_id, event_id, start_ts, end_ts, all_day, title, status",
}


# -- WHOOP ----------------------------------------------------------------------------------
def test_paging_60_cycles_three_pages_exactly_60_rows(env, servers, run_cli):
    ws, _ = servers
    ws.data = make_days(60, FIRST_NIGHT)
    seed_whoop(env, ws)
    code, out, err = run_cli("sync", "whoop")
    assert code == 0, err
    assert len(ws.srv.calls("GET", "/developer/v2/cycle")) == 3
    assert q(env, "SELECT count(*) FROM raw_whoop WHERE kind = 'cycle'") == [(60,)]
    assert q(env, "SELECT count(*) FROM samples WHERE metric = 'strain'") == [(60,)]
    assert q(env, "SELECT count(*) FROM sleep_sessions") == [(60,)]
    assert q(env, "SELECT count(*) FROM workouts") == [(60,)]
    assert cursors(env, "whoop")["cycle"] == "2026-04-29T03:00:00.000Z"
    assert q(env, "SELECT ok FROM runs WHERE kind = 'sync'") == [(True,)]
    # A second sync re-fetches only the lag window and adds nothing.
    before = counts(env)
    assert run_cli("sync", "whoop")[0] == 0
    assert counts(env) == before
    starts = {r.query.get("start") for r in ws.srv.calls("GET", "/developer/v2/cycle")[3:]}
    assert starts == {"2026-04-26T03:00:00.000Z"}  # cursor minus whoop_lag_days (3)


def test_429_with_retry_after_then_success(env, servers, waits):
    ws, _ = servers
    ws.data = make_days(3, FIRST_NIGHT)
    seed_whoop(env, ws)
    ws.faults["/v2/activity/sleep"] = [Reply(429, headers={"Retry-After": "7"})]
    result = sync(env, ["whoop"])
    assert result["ok"]
    assert waits == [7.0]
    assert q(env, "SELECT count(*) FROM sleep_sessions") == [(3,)]


def test_expired_access_token_refreshes_and_the_old_refresh_token_is_dead(env, servers):
    ws, _ = servers
    ws.data = make_days(2, FIRST_NIGHT)
    old = seed_whoop(env, ws, expires_in=-1)
    assert sync(env, ["whoop"])["ok"]
    saved = FileTokenStore(env.tokens_dir).load("whoop")
    assert saved["refresh_token"] == ws.refresh_token != old["refresh_token"]
    assert saved["access_token"] in ws.access_tokens
    assert stat.S_IMODE((env.tokens_dir / "whoop.json").stat().st_mode) == 0o600
    assert q(env, "SELECT count(*) FROM workouts") == [(2,)]
    # The server refuses the rotated-out refresh token from now on.
    r = httpx.post(ws.token_url, data={"grant_type": "refresh_token", "refresh_token": old["refresh_token"], "client_id": "cid", "client_secret": "csecret"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    # And a store that still held the old one fails cleanly, telling the user what to do.
    FileTokenStore(env.tokens_dir).save("whoop", {**old, "expires_at": 0})
    result = sync(env, ["whoop"])
    assert result["sources"]["whoop"] == {"ok": False, "error": "whoop: refresh token rejected; run `rhythm auth whoop` again"}


def test_401_midway_refreshes_once_and_goes_on(env, servers):
    ws, _ = servers
    ws.data = make_days(2, FIRST_NIGHT)
    seed_whoop(env, ws)
    ws.faults["/v2/activity/workout"] = [Reply(401)]
    assert sync(env, ["whoop"])["ok"]
    assert len(ws.srv.calls("POST", "/oauth/oauth2/token")) == 1
    assert q(env, "SELECT count(*) FROM workouts") == [(2,)]


def test_500_storm_fails_cleanly_cursor_unchanged_nothing_written(env, servers, run_cli):
    ws, gs = servers
    ws.data = make_days(30, FIRST_NIGHT)
    tok = seed_whoop(env, ws)
    seed_google(env, gs)
    gs.put(PRIMARY, timed("g1", "2026-05-01T09:00:00-07:00", "2026-05-01T10:00:00-07:00"))
    assert run_cli("sync", "whoop")[0] == 0
    before_rows, before_cursors = snapshot(env), cursors(env, "whoop")
    ws.data = make_days(40, FIRST_NIGHT)  # ten new days are waiting ...
    ws.faults["/v2/activity/workout"] = [Reply(500)] * 50  # ... but the server is melting
    code, out, err = run_cli("sync", "whoop", "google")
    assert code == 1
    assert "whoop: GET /developer/v2/activity/workout kept failing (HTTP 500) after 3 retries" in err
    assert tok["access_token"] not in err + out and tok["refresh_token"] not in err + out
    assert cursors(env, "whoop") == before_cursors
    after = snapshot(env)
    assert {t: after[t] for t in ("raw_whoop", "samples", "sleep_sessions", "workouts")} == {
        t: before_rows[t] for t in ("raw_whoop", "samples", "sleep_sessions", "workouts")
    }  # the cycles and sleeps fetched before the failure were rolled back too
    errors = q(env, "SELECT DISTINCT last_error FROM sync_state WHERE source = 'whoop'")
    assert errors == [("whoop: GET /developer/v2/activity/workout kept failing (HTTP 500) after 3 retries",)]
    # Google still synced in the same run.
    assert q(env, "SELECT event_id FROM events") == [("g1",)]
    assert q(env, "SELECT source, ok FROM runs WHERE kind = 'sync' ORDER BY id") == [
        ("whoop", True), ("whoop", False), ("google", True)]
    summaries = q(env, "SELECT summary FROM runs")
    assert not any(tok["access_token"] in str(s) or tok["refresh_token"] in str(s) for s in summaries)


def test_pending_score_turns_scored_on_the_next_sync(env, servers):
    ws, _ = servers
    ws.data = make_days(5, FIRST_NIGHT, pending_last=True)
    seed_whoop(env, ws)
    assert sync(env, ["whoop"])["ok"]
    last_day = "2026-03-05"
    assert q(env, "SELECT value FROM samples WHERE metric = 'recovery' AND local_day = ?", [last_day]) == [(None,)]
    assert q(env, "SELECT score FROM sleep_sessions WHERE local_day = ?", [last_day]) == [(None,)]
    before = counts(env)
    score_pending(ws.data)
    assert sync(env, ["whoop"])["ok"]
    assert q(env, "SELECT value FROM samples WHERE metric = 'recovery' AND local_day = ?", [last_day]) == [(88.0,)]
    performance = sleep_template()["score"]["sleep_performance_percentage"]  # what score_pending sets
    assert q(env, "SELECT score FROM sleep_sessions WHERE local_day = ?", [last_day]) == [(performance,)]
    after = counts(env)
    assert after["raw_whoop"] == before["raw_whoop"] and after["sleep_sessions"] == before["sleep_sessions"]
    assert q(env, "SELECT count(*) FROM samples WHERE metric = 'recovery'") == [(5,)]  # updated, not added
    assert after["samples"] == before["samples"] + 4  # its RHR, HRV, SpO2, skin temp now exist


def _clean_run_snapshot(settings, ws, days):
    ws.data = make_days(days, FIRST_NIGHT)
    seed_whoop(settings, ws)
    assert sync(settings, ["whoop"])["ok"]
    return snapshot(settings), cursors(settings, "whoop")


def test_server_dies_after_page_two_then_rerun_equals_a_clean_run(env, servers, tmp_path):
    ws, _ = servers
    ws.data = make_days(60, FIRST_NIGHT)
    seed_whoop(env, ws)
    ws.die_after_pages = 2
    result = sync(env, ["whoop"])
    assert not result["ok"] and "could not connect" in result["sources"]["whoop"]["error"]
    assert counts(env)["raw_whoop"] == 0 and cursors(env, "whoop") == {s: None for s in ["cycle"]}
    ws.die_after_pages = None
    assert sync(env, ["whoop"])["ok"]
    clean = load_settings(home=tmp_path / "clean", env={**_env_of(env), "RHYTHM_HOME": str(tmp_path / "clean")})
    expected, expected_cursors = _clean_run_snapshot(clean, ws, 60)
    assert snapshot(env) == expected
    assert cursors(env, "whoop") == expected_cursors


def test_process_interrupted_midway_then_rerun_equals_a_clean_run(env, servers, tmp_path):
    ws, _ = servers
    ws.data = make_days(30, FIRST_NIGHT)
    seed_whoop(env, ws)
    assert sync(env, ["whoop"])["ok"]  # an earlier, complete sync
    ws.data = make_days(50, FIRST_NIGHT)

    def interrupt(source, n):
        if n >= 100:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sync(env, ["whoop"], progress=interrupt)
    assert q(env, "SELECT count(*) FROM raw_whoop WHERE kind = 'cycle'") == [(30,)]
    assert sync(env, ["whoop"])["ok"]
    clean = load_settings(home=tmp_path / "clean", env={**_env_of(env), "RHYTHM_HOME": str(tmp_path / "clean")})
    expected, expected_cursors = _clean_run_snapshot(clean, ws, 50)
    assert snapshot(env) == expected
    assert cursors(env, "whoop") == expected_cursors


def _env_of(settings) -> dict[str, str]:
    return {
        "RHYTHM_WHOOP_API_BASE": settings.whoop_api_base,
        "RHYTHM_WHOOP_TOKEN_URL": settings.whoop_token_url,
        "RHYTHM_WHOOP_CLIENT_ID": "cid",
        "RHYTHM_WHOOP_CLIENT_SECRET": "csecret",
    }


def test_auth_whoop_through_the_loopback_redirect(env, servers):
    ws, _ = servers

    def browser(url: str) -> None:
        threading.Thread(target=lambda: httpx.get(url, follow_redirects=True), daemon=True).start()

    result = auth_whoop(env, open_browser=False, on_url=browser, port=0, timeout_s=10)
    saved = FileTokenStore(env.tokens_dir).load("whoop")
    assert saved["refresh_token"] == ws.refresh_token and saved["access_token"] in ws.access_tokens
    assert result["refresh_token"] is True and "access_token" not in result
    assert stat.S_IMODE((env.tokens_dir / "whoop.json").stat().st_mode) == 0o600
    auth_call = ws.srv.calls("GET", "/oauth/oauth2/auth")[0]
    assert "offline" in auth_call.query["scope"].split()
    assert auth_call.query["redirect_uri"].startswith("http://localhost:")


# -- Google ---------------------------------------------------------------------------------
def test_google_first_then_incremental_sync(env, servers, run_cli):
    _, gs = servers
    seed_google(env, gs, expired=True)  # also exercises google-auth's refresh at token_uri
    for i in range(7):
        gs.put(PRIMARY, timed(f"e{i}", f"2026-05-0{i + 1}T09:00:00-07:00", f"2026-05-0{i + 1}T10:00:00-07:00"))
    gs.put(FAMILY, all_day("trip", "2026-05-04", "2026-05-07"))
    assert run_cli("sync", "google")[0] == 0
    assert q(env, "SELECT count(*) FROM events WHERE source = 'google'") == [(8,)]
    assert q(env, "SELECT all_day, local_day, start_ts, end_ts FROM events WHERE event_id = 'trip'") == [
        (True, datetime(2026, 5, 4).date(), datetime(2026, 5, 4, tzinfo=UTC), datetime(2026, 5, 7, tzinfo=UTC))]
    assert FileTokenStore(env.tokens_dir).load("google")["access_token"] in gs.access_tokens
    first_cursor = cursors(env, "google")[PRIMARY]
    assert first_cursor in gs.issued_tokens
    # nextSyncToken came only with the last of three pages
    pages = gs.srv.calls("GET", "/calendar/v3/calendars/foo.bar%40gmail.com/events")
    assert [p.query.get("pageToken") for p in pages] == [None, "3", "6"]
    # incremental: a moved event, a cancelled one, a new one
    gs.put(PRIMARY, timed("e1", "2026-05-02T15:00:00-07:00", "2026-05-02T16:00:00-07:00"))
    gs.cancel(PRIMARY, "e2")
    gs.put(PRIMARY, timed("e9", "2026-05-20T09:00:00-07:00", "2026-05-20T09:30:00-07:00"))
    assert run_cli("sync", "google")[0] == 0
    last = gs.srv.calls("GET", "/calendar/v3/calendars/foo.bar%40gmail.com/events")[-1]
    assert last.query["syncToken"] == first_cursor and "timeMin" not in last.query
    ids = [r[0] for r in q(env, "SELECT event_id FROM events WHERE calendar_id = ? ORDER BY 1", [PRIMARY])]
    assert ids == ["e0", "e1", "e3", "e4", "e5", "e6", "e9"]
    assert q(env, "SELECT start_ts FROM events WHERE event_id = 'e1'") == [(datetime(2026, 5, 2, 22, tzinfo=UTC),)]
    assert q(env, "SELECT count(*) FROM raw_calendar WHERE natural_key = 'e2'") == [(0,)]


def test_google_410_wipes_that_calendar_and_resyncs_fully(env, servers):
    _, gs = servers
    seed_google(env, gs)
    gs.put(PRIMARY, timed("keep", "2026-05-01T09:00:00Z", "2026-05-01T10:00:00Z", tz="UTC"))
    gs.put(FAMILY, all_day("f1", "2026-05-04", "2026-05-05"))
    gs.put(FAMILY, all_day("f2", "2026-05-06", "2026-05-07"))
    assert sync(env, ["google"])["ok"]
    family_cursor = cursors(env, "google")[FAMILY]
    # While the token was stale, f2 was deleted in a way the server no longer reports.
    del gs.events[FAMILY]["f2"]
    del gs.versions[FAMILY]["f2"]
    gs.expire_sync_tokens()
    result = sync(env, ["google"])
    assert result["ok"] and result["sources"]["google"]["tables"]["events"]["deleted"] == 3  # keep, f1, f2
    assert q(env, "SELECT event_id FROM events WHERE calendar_id = ? ORDER BY 1", [FAMILY]) == [("f1",)]
    assert q(env, "SELECT event_id FROM events WHERE calendar_id = ?", [PRIMARY]) == [("keep",)]
    fam_calls = gs.srv.calls("GET", "/calendar/v3/calendars/family123456789%40group.calendar.google.com/events")
    assert fam_calls[-2].query.get("syncToken") == family_cursor  # answered 410
    assert "timeMin" in fam_calls[-1].query and "syncToken" not in fam_calls[-1].query
    assert cursors(env, "google")[FAMILY] not in gs.expired_tokens


def test_google_rejected_refresh_token_is_one_clean_line(env, servers, run_cli):
    _, gs = servers
    FileTokenStore(env.tokens_dir).save("google", {"access_token": "old-access", "refresh_token": "revoked-refresh", "expires_at": time.time() - 10})
    code, out, err = run_cli("sync", "google")
    assert code == 1
    assert "error: google: refresh token rejected; run `rhythm auth google` again" in err
    assert "revoked-refresh" not in err and "old-access" not in err


# -- selection --------------------------------------------------------------------------------
def test_nothing_configured_is_not_an_error(env, run_cli):
    code, out, _ = run_cli("sync")
    assert code == 0 and "nothing to sync" in out


def test_default_is_every_authorised_source(env, servers, run_cli):
    ws, gs = servers
    ws.data = make_days(1, FIRST_NIGHT)
    seed_whoop(env, ws)
    seed_google(env, gs)
    code, out, _ = run_cli("sync", "--json")
    assert code == 0
    assert '"whoop"' in out and '"google"' in out and '"garmin"' not in out


def test_unknown_source(env, run_cli):
    code, _, err = run_cli("sync", "fitbit")
    assert code == 2 and "unknown source 'fitbit'" in err


def test_garmin_without_login_fails_alone(env, servers, run_cli):
    ws, _ = servers
    ws.data = make_days(1, FIRST_NIGHT)
    seed_whoop(env, ws)
    code, _, err = run_cli("sync", "garmin", "whoop")
    assert code == 1
    assert err.count("error:") == 1 and "garmin" in err
    assert q(env, "SELECT count(*) FROM workouts") == [(1,)]
