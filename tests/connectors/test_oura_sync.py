"""`rhythm sync oura` and `rhythm auth oura` end to end against a loopback Oura server.

Every scenario asserts what is in the database afterwards: rows, raw payloads and their
fetch times, cursors in sync_state, errors, and that a failed sync left nothing behind.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from connectors.http import RetryPolicy
from connectors.oauth import FileTokenStore
from rhythm import sync as sync_mod
from rhythm.settings import load_settings
from rhythm.sync import auth_oura
from storage import open_db
from tests.connectors.oura_server import CLIENT_ID, CLIENT_SECRET, OuraServer, make_days
from tests.loopback import Loopback, Reply

DAYS = 10
STREAMS = ("daily_sleep", "sleep", "daily_readiness", "daily_activity", "daily_stress", "workout", "heartrate")


@pytest.fixture
def oura():
    now = datetime.now(UTC)
    with Loopback() as srv:
        yield OuraServer(srv, make_days(DAYS, now.date(), until=now - timedelta(minutes=1)))


@pytest.fixture
def waits(monkeypatch):
    """Every retry wait the sync asks for, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(sync_mod, "default_policy", lambda: RetryPolicy(max_retries=3, sleep=recorded.append, jitter=False))
    return recorded


@pytest.fixture
def env(rhythm_home, oura, monkeypatch, waits):
    for k, v in {
        "RHYTHM_OURA_API_BASE": oura.api_base,
        "RHYTHM_OURA_TOKEN_URL": oura.token_url,
        "RHYTHM_OURA_AUTH_URL": oura.auth_url,
        "RHYTHM_OURA_CLIENT_ID": CLIENT_ID,
        "RHYTHM_OURA_CLIENT_SECRET": CLIENT_SECRET,
    }.items():
        monkeypatch.setenv(k, v)
    return load_settings()


def seed_oauth(settings, server: OuraServer, expires_in: float = 3000) -> dict:
    tok = server.issue_tokens() | {"kind": "oauth", "expires_at": time.time() + expires_in}
    FileTokenStore(settings.tokens_dir).save("oura", tok)
    return tok


def seed_pat(settings, server: OuraServer) -> str:
    FileTokenStore(settings.tokens_dir).save("oura", {"access_token": server.pat, "kind": "personal"})
    return server.pat


def q(settings, sql: str, params=None) -> list[tuple]:
    with open_db(settings.database, read_only=True) as db:
        return db.query(sql, params)[1]


def cursors(settings) -> dict[str, str | None]:
    return dict(q(settings, "SELECT stream, cursor FROM sync_state WHERE source = 'oura'"))


def counts(settings) -> dict[str, int]:
    with open_db(settings.database, read_only=True) as db:
        c = db.row_counts()
    return {k: v for k, v in c.items() if k not in ("runs", "schema_migrations", "sync_state")}


def raw_rows(settings) -> dict[tuple[str, str], tuple]:
    """(kind, natural_key) -> (fetched_at, hash) of every raw Oura payload."""
    return {(k, n): (f, h) for k, n, f, h in q(settings, "SELECT kind, natural_key, fetched_at, hash FROM raw_oura")}


SNAPSHOT = {
    "raw_oura": "kind, natural_key, payload",
    "samples": "source, metric, start_ts, end_ts, value, local_day, tz_offset_min, detail",
    "sleep_sessions": "session_id, start_ts, end_ts, local_day, sleep_min, hrv_rmssd_ms, resting_hr_bpm",
    "workouts": "workout_id, start_ts, energy_kcal",
}


def snapshot(settings) -> dict[str, list]:
    with open_db(settings.database, read_only=True) as db:
        return {t: db.query(f"SELECT {cols} FROM {t} ORDER BY ALL")[1] for t, cols in SNAPSHOT.items()}


def sync_ok(run_cli) -> dict:
    code, out, err = run_cli("sync", "oura", "--json")
    assert code == 0, err
    result = json.loads(out)["sources"]["oura"]
    assert result["ok"], result
    return result


def _day(server: OuraServer, offset: int) -> date:
    return date.fromisoformat(server.data["daily_activity"][-1]["day"]) + timedelta(days=offset)


# -- the first sync ---------------------------------------------------------------------------
def test_first_sync_lands_every_stream_with_its_cursor(env, oura, run_cli):
    seed_oauth(env, oura)
    result = sync_ok(run_cli)
    assert result["streams"] == sorted(STREAMS)
    data, today = oura.data, _day(oura, 0)
    nights = [d for d in data["sleep"] if d["type"] == "long_sleep"]
    naps = [d for d in data["sleep"] if d["type"] == "sleep"]
    assert q(env, "SELECT count(*) FILTER (WHERE NOT is_nap), count(*) FILTER (WHERE is_nap) FROM sleep_sessions") == [
        (len(nights), len(naps))]
    assert q(env, "SELECT count(*) FROM workouts WHERE source = 'oura'") == [(len(data["workout"]),)]
    per_metric = dict(q(env, "SELECT metric, count(*) FROM samples GROUP BY ALL"))
    assert per_metric["heart_rate"] == len(data["heartrate"])
    assert per_metric["steps"] == per_metric["readiness"] == per_metric["sleep_score"] == DAYS
    kinds = dict(q(env, "SELECT kind, count(*) FROM raw_oura GROUP BY ALL"))
    assert kinds == {"sleep": len(data["sleep"]), "workout": len(data["workout"]), "heartrate": DAYS,
                     **{k: DAYS for k in ("daily_sleep", "daily_readiness", "daily_activity", "daily_stress")}}
    cur = cursors(env)
    assert {k: cur[k] for k in ("daily_sleep", "sleep", "daily_readiness", "daily_activity", "daily_stress")} == dict.fromkeys(
        ("daily_sleep", "sleep", "daily_readiness", "daily_activity", "daily_stress"), today.isoformat())
    assert cur["workout"] == max(d["day"] for d in data["workout"])
    assert datetime.fromisoformat(cur["heartrate"]) == max(datetime.fromisoformat(r["timestamp"]) for r in data["heartrate"])
    # the whole history on the first sync (oura_history_days = 730, one day of padding)
    first = oura.calls("daily_sleep")[0].query
    assert first["start_date"] == (datetime.now(UTC).date() - timedelta(days=731)).isoformat()
    # the ring's local time is kept: offset and wake-up day of every night
    for doc in nights:
        end = datetime.fromisoformat(doc["bedtime_end"])
        assert q(env, "SELECT tz_offset_min, local_day, end_ts FROM sleep_sessions WHERE session_id = ?", [doc["id"]]) == [
            (int(end.utcoffset().total_seconds() // 60), end.date(), end)]
    code, out, _ = run_cli("status", "--json")
    oura_status = next(s for s in json.loads(out)["sources"] if s["source"] == "oura")
    assert oura_status["rows"]["sleep_sessions"] == len(data["sleep"])


def test_history_days_bounds_the_first_sync(env, oura, run_cli, rhythm_home):
    (rhythm_home / "config.toml").write_text("[oura]\nhistory_days = 5\n")
    seed_oauth(env, oura)
    sync_ok(run_cli)
    today = datetime.now(UTC).date()
    assert oura.calls("daily_readiness")[0].query["start_date"] == (today - timedelta(days=6)).isoformat()
    hr = oura.calls("heartrate")[0].query["start_datetime"]
    assert datetime.fromisoformat(hr) == datetime.combine(today - timedelta(days=5), datetime.min.time(), UTC)
    # five days back, and the one day of padding Oura's date filters call for; not the older ones
    assert q(env, "SELECT min(local_day) FROM samples WHERE metric = 'readiness'") == [(today - timedelta(days=6),)]


# -- idempotency, the lag window and re-scored days ----------------------------------------------
@pytest.mark.slow  # a whole sync over weeks of data: over 2 s
def test_resync_adds_no_rows_and_asks_only_for_the_lag_window(env, oura, run_cli):
    seed_oauth(env, oura)
    sync_ok(run_cli)
    before_counts, before_raw, before_cursors = counts(env), raw_rows(env), cursors(env)
    n_calls = len(oura.srv.requests)
    result = sync_ok(run_cli)
    assert all(t["inserted"] == 0 and t["deleted"] == 0 for t in result["tables"].values()), result["tables"]
    assert counts(env) == before_counts
    assert raw_rows(env) == before_raw  # unchanged payloads: no new raw row, fetch time kept
    assert cursors(env) == before_cursors
    today = datetime.now(UTC).date()
    second = oura.srv.requests[n_calls:]
    dated = [r for r in second if r.path.endswith("/daily_readiness")]
    assert dated[0].query["start_date"] == (today - timedelta(days=3)).isoformat()  # cursor (today) - 2 - 1
    assert dated[0].query["end_date"] == (today + timedelta(days=2)).isoformat()
    hr = [r for r in second if r.path.endswith("/heartrate")]
    last = datetime.fromisoformat(before_cursors["heartrate"])
    assert datetime.fromisoformat(hr[0].query["start_datetime"]) == datetime.combine(
        (last - timedelta(days=2)).date(), datetime.min.time(), UTC)
    assert len(hr) == 1  # two days of heart rate: one request


@pytest.mark.slow  # a whole sync over weeks of data: over 2 s
def test_rescored_days_and_todays_growing_totals_update_in_place(env, oura, run_cli):
    seed_oauth(env, oura)
    sync_ok(run_cli)
    before = raw_rows(env)
    yesterday, today = _day(oura, -1), _day(oura, 0)
    oura.doc("daily_readiness", yesterday)["score"] += 4  # Oura re-scored yesterday
    night = next(d for d in oura.data["sleep"] if d["day"] == yesterday.isoformat() and d["type"] == "long_sleep")
    night["average_hrv"] += 3
    night["sleep_analysis_reason"] = "bedtime_edit"
    oura.doc("daily_activity", today)["steps"] += 1234  # the day goes on
    new_score = oura.doc("daily_readiness", yesterday)["score"]
    new_steps = oura.doc("daily_activity", today)["steps"]
    time.sleep(0.01)  # a later fetch time than the first sync's
    result = sync_ok(run_cli)
    assert result["tables"]["samples"]["inserted"] == 0 and result["tables"]["raw_oura"]["inserted"] == 0
    assert q(env, "SELECT value FROM samples WHERE metric = 'readiness' AND local_day = ?", [yesterday]) == [(new_score,)]
    assert q(env, "SELECT value FROM samples WHERE metric = 'steps' AND local_day = ?", [today]) == [(new_steps,)]
    assert q(env, "SELECT hrv_rmssd_ms FROM sleep_sessions WHERE session_id = ?", [night["id"]]) == [(night["average_hrv"],)]
    after = raw_rows(env)
    assert after.keys() == before.keys()  # updated in place: one raw row per document still
    changed = {k for k in after if after[k] != before[k]}
    assert changed == {("daily_readiness", yesterday.isoformat()), ("daily_activity", today.isoformat()),
                       ("sleep", night["id"])}
    assert all(after[k][0] > before[k][0] for k in changed)


@pytest.mark.slow  # a whole sync over weeks of data: over 2 s
def test_a_period_deleted_in_the_app_is_removed_on_the_next_sync(env, oura, run_cli):
    seed_oauth(env, oura)
    sync_ok(run_cli)
    night = next(d for d in oura.data["sleep"] if d["day"] == _day(oura, -1).isoformat())
    night["type"] = "deleted"
    result = sync_ok(run_cli)
    assert result["tables"]["sleep_sessions"]["deleted"] == 1
    assert q(env, "SELECT count(*) FROM sleep_sessions WHERE session_id = ?", [night["id"]]) == [(0,)]
    assert q(env, "SELECT payload->>'type' FROM raw_oura WHERE natural_key = ?", [night["id"]]) == [("deleted",)]


# -- the protocol's failures ----------------------------------------------------------------------
def test_429_with_retry_after_and_5xx_are_waited_out(env, oura, run_cli, waits):
    seed_oauth(env, oura)
    oura.faults["sleep"] = [Reply.json({"status": 429, "title": "Too Many Requests"}, status=429,
                                       headers={"Retry-After": "3", "X-RateLimit-Tier": "token"}), Reply(500)]
    oura.faults["heartrate"] = [Reply(503)]
    sync_ok(run_cli)
    assert waits[:3] == [3.0, 1.0, 0.5]  # Retry-After, then backoff (attempt 2), then a fresh call's first
    assert q(env, "SELECT count(*) FROM sleep_sessions") == [(len(oura.data["sleep"]),)]


def test_401_refreshes_once_and_stores_the_rotated_token(env, oura, run_cli):
    old = seed_oauth(env, oura)
    oura.expire_access_tokens()  # Oura revoked the access token before it expired
    code, out, err = run_cli("sync", "oura")
    assert code == 0, err
    assert oura.refreshes == 1 and old["refresh_token"] in oura.used_refresh_tokens
    saved = FileTokenStore(env.tokens_dir).load("oura")
    assert saved["refresh_token"] == oura.refresh_token and saved["access_token"] in oura.access_tokens
    assert saved["kind"] == "oauth"
    assert stat.S_IMODE((env.tokens_dir / "oura.json").stat().st_mode) == 0o600
    for secret in (old["access_token"], old["refresh_token"], saved["access_token"], saved["refresh_token"], CLIENT_SECRET):
        assert secret not in out + err
    assert q(env, "SELECT count(*) FROM raw_oura WHERE kind = 'daily_sleep'") == [(DAYS,)]


def test_an_expired_token_is_refreshed_before_the_first_call(env, oura, run_cli):
    seed_oauth(env, oura, expires_in=-5)
    sync_ok(run_cli)
    assert oura.refreshes == 1
    assert all(r.bearer in oura.access_tokens for r in oura.srv.requests if r.path.startswith("/v2/"))


def test_a_rejected_refresh_token_is_one_line_and_prints_no_token(env, oura, run_cli):
    FileTokenStore(env.tokens_dir).save("oura", {"access_token": "stale-access-x1", "refresh_token": "revoked-refresh-x2",
                                                 "kind": "oauth", "expires_at": time.time() - 10})
    code, out, err = run_cli("sync", "oura")
    assert code == 1
    assert "error: oura: refresh token rejected; run `rhythm auth oura` again" in err
    assert len(err.strip().splitlines()) == 1
    assert "stale-access-x1" not in out + err and "revoked-refresh-x2" not in out + err
    assert q(env, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'raw_oura'") == [(0,)]


@pytest.mark.slow  # a whole sync over weeks of data: over 2 s
def test_a_failed_sync_leaves_the_database_as_it_was(env, oura, run_cli):
    seed_oauth(env, oura)
    sync_ok(run_cli)
    before, before_cursors = snapshot(env), cursors(env)
    oura.doc("daily_readiness", _day(oura, -1))["score"] += 7  # would change a row...
    oura.faults["heartrate"] = [Reply(500)] * 10  # ...but heart rate (the last stream) keeps failing
    code, out, err = run_cli("sync", "oura")
    assert code == 1
    line = "oura: GET /v2/usercollection/heartrate kept failing (HTTP 500) after 3 retries"
    assert err.strip() == f"error: {line}"
    assert snapshot(env) == before and cursors(env) == before_cursors
    assert set(q(env, "SELECT DISTINCT last_error FROM sync_state WHERE source = 'oura'")) == {(line,)}
    assert q(env, "SELECT ok FROM runs WHERE source = 'oura' ORDER BY id") == [(True,), (False,)]


@pytest.mark.slow  # a whole sync over weeks of data: over 2 s
def test_a_failed_first_sync_leaves_no_rows_and_no_raw_table(env, oura, run_cli):
    seed_oauth(env, oura)
    oura.faults["daily_stress"] = [Reply.drop()] * 10  # the server dies mid-sync
    code, _, err = run_cli("sync", "oura")
    assert code == 1 and "oura: GET /v2/usercollection/daily_stress could not connect" in err
    assert counts(env).get("sleep_sessions") == 0 and counts(env).get("samples") == 0
    assert q(env, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'raw_oura'") == [(0,)]
    assert cursors(env) == {"sleep": None}  # the failure is noted on the default stream, no cursor
    oura.faults.clear()
    sync_ok(run_cli)  # and the next sync starts from the beginning
    assert q(env, "SELECT count(*) FROM raw_oura WHERE kind = 'daily_stress'") == [(DAYS,)]


# -- personal access tokens ------------------------------------------------------------------------
def test_auth_with_a_personal_token_from_the_environment(env, oura, run_cli, monkeypatch):
    monkeypatch.setenv("RHYTHM_OURA_TOKEN", oura.pat)
    code, out, err = run_cli("auth", "oura")
    assert code == 0, err
    assert "oura: authorised" in out and oura.pat not in out + err
    saved = FileTokenStore(env.tokens_dir).load("oura")
    assert saved["access_token"] == oura.pat and saved["kind"] == "personal"
    assert stat.S_IMODE((env.tokens_dir / "oura.json").stat().st_mode) == 0o600
    assert oura.srv.calls("GET", "/v2/usercollection/personal_info")[0].bearer == oura.pat  # checked first
    monkeypatch.delenv("RHYTHM_OURA_TOKEN")
    code, out, err = run_cli("sync", "--json")  # every authorised source: oura
    assert code == 0, err
    assert json.loads(out)["sources"]["oura"]["ok"]
    assert {r.bearer for r in oura.srv.requests if r.path.startswith("/v2/")} == {oura.pat}
    assert oura.srv.calls("POST", "/oauth/token") == []


def test_auth_with_a_personal_token_on_standard_input_that_is_no_terminal(env, oura):
    from rhythm.cli.main import app

    result = CliRunner().invoke(app, ["auth", "oura", "--token"], input=oura.pat + "\n")
    assert result.exit_code == 0, result.output
    assert "Oura personal access token" not in result.output and oura.pat not in result.output  # no prompt
    assert len(result.output.strip().splitlines()) == 1
    assert FileTokenStore(env.tokens_dir).load("oura")["access_token"] == oura.pat


def _piped(env_vars: dict[str, str], stdin: str) -> subprocess.CompletedProcess:
    root = Path(__file__).resolve().parents[2]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RHYTHM_")}
    environ.update(env_vars, PYTHONPATH=str(root))
    return subprocess.run([sys.executable, "-m", "rhythm", "auth", "oura", "--token"], input=stdin, text=True,
                          capture_output=True, env=environ, cwd=root, timeout=120)


def _oura_env(settings, oura) -> dict[str, str]:
    return {"RHYTHM_HOME": str(settings.home), "RHYTHM_OURA_API_BASE": oura.api_base}


def test_echo_token_into_rhythm_auth_oura_prints_one_line_and_never_the_token(env, oura):
    """`echo TOKEN | rhythm auth oura --token`, a real pipe into a real process."""
    done = _piped(_oura_env(env, oura), oura.pat + "\n")
    assert done.returncode == 0, done.stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("oura: authorised"), lines
    assert oura.pat not in done.stdout + done.stderr and "echoed" not in done.stderr
    assert FileTokenStore(env.tokens_dir).load("oura")["access_token"] == oura.pat


@pytest.mark.parametrize("stdin", ["pat-not-valid-27182\n", "\n", ""], ids=["refused", "blank", "empty"])
def test_a_bad_piped_token_is_one_line_and_nothing_is_stored(env, oura, stdin):
    done = _piped(_oura_env(env, oura), stdin)
    assert done.returncode != 0
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: oura: "), lines
    assert "pat-not-valid-27182" not in done.stdout + done.stderr and "Warning" not in done.stderr
    assert not (env.tokens_dir / "oura.json").exists()


def test_a_refused_personal_token_is_not_stored(env, oura, run_cli, monkeypatch):
    monkeypatch.setenv("RHYTHM_OURA_TOKEN", "pat-not-valid-31415")
    code, out, err = run_cli("auth", "oura")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "personal access token was refused" in err and "pat-not-valid-31415" not in out + err
    assert not (env.tokens_dir / "oura.json").exists()


def test_a_personal_token_revoked_later_is_one_line_and_never_refreshed(env, oura, run_cli):
    pat = seed_pat(env, oura)
    oura.personal_tokens.clear()
    code, out, err = run_cli("sync", "oura")
    assert code == 1 and "oura: the personal access token was refused; run `rhythm auth oura` again" in err
    assert pat not in out + err and oura.srv.calls("POST", "/oauth/token") == []


# -- OAuth2 with PKCE -------------------------------------------------------------------------------
def test_auth_oura_oauth_with_pkce_through_the_loopback_redirect(env, oura, run_cli):
    def browser(url: str) -> None:
        threading.Thread(target=lambda: httpx.get(url, follow_redirects=True), daemon=True).start()

    result = auth_oura(env, open_browser=False, on_url=browser, port=0, timeout_s=10)
    saved = FileTokenStore(env.tokens_dir).load("oura")
    assert saved["refresh_token"] == oura.refresh_token and saved["access_token"] in oura.access_tokens
    assert saved["kind"] == "oauth" and result["kind"] == "oauth" and result["refresh_token"] is True
    assert saved["access_token"] not in json.dumps(result) and saved["refresh_token"] not in json.dumps(result)
    assert stat.S_IMODE((env.tokens_dir / "oura.json").stat().st_mode) == 0o600
    authorize = oura.srv.calls("GET", "/oauth/authorize")[0].query
    assert authorize["code_challenge_method"] == "S256" and authorize["redirect_uri"].startswith("http://localhost:")
    assert set(authorize["scope"].split()) == {"daily", "heartrate", "workout"}
    exchange = oura.srv.calls("POST", "/oauth/token")[0].form
    assert exchange["grant_type"] == "authorization_code" and len(exchange["code_verifier"]) >= 43
    sync_ok(run_cli)  # and the stored token syncs


def test_oauth_without_a_client_is_one_line(rhythm_home, run_cli, monkeypatch):
    code, _, err = run_cli("auth", "oura", "--oauth", "--no-browser")
    assert code == 2 and "RHYTHM_OURA_CLIENT_ID" in err and len(err.strip().splitlines()) == 1
