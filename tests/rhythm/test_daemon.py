"""The daemon: a full cycle against loopback WHOOP and Google servers, isolation of a failing
source, the schedule it builds from settings, logging, and a clean SIGTERM shutdown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from common.errors import ConfigError
from connectors.http import RetryPolicy
from rhythm import daemon, lock
from rhythm import sync as sync_mod
from rhythm.settings import load_settings, local_today
from storage import open_db
from tests.connectors.google_server import GoogleServer, timed
from tests.connectors.whoop_server import WhoopServer, make_days
from tests.loopback import Loopback, Reply
from tests.test_sync import FIRST_NIGHT, PRIMARY, seed_google, seed_whoop

REPO = Path(__file__).resolve().parents[2]
SAMPLE_ICS = REPO / "rhythm" / "data" / "sample" / "calendar.ics"
LAST_DAY = (FIRST_NIGHT + timedelta(days=9)).date()


@pytest.fixture
def servers():
    with Loopback() as w, Loopback() as g:
        yield WhoopServer(w), GoogleServer(g)


@pytest.fixture
def env(rhythm_home, servers, monkeypatch):
    ws, gs = servers
    monkeypatch.setattr(sync_mod, "default_policy", lambda: RetryPolicy(max_retries=2, sleep=lambda _s: None, jitter=False))
    values = {
        "RHYTHM_WHOOP_API_BASE": ws.api_base,
        "RHYTHM_WHOOP_TOKEN_URL": ws.token_url,
        "RHYTHM_WHOOP_CLIENT_ID": "cid",
        "RHYTHM_WHOOP_CLIENT_SECRET": "csecret",
        "RHYTHM_GOOGLE_API_BASE": gs.api_base,
        "RHYTHM_GOOGLE_TOKEN_URL": gs.token_url,
        "RHYTHM_GOOGLE_CLIENT_ID": "gid",
        "RHYTHM_GOOGLE_CLIENT_SECRET": "gsecret",
        "RHYTHM_TIMEZONE": "Europe/Amsterdam",
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    settings = load_settings()
    ws.data = make_days(10, FIRST_NIGHT)
    gs.put(PRIMARY, timed("g1", "2026-03-05T09:00:00-08:00", "2026-03-05T10:00:00-08:00", summary="Sprint review"))
    gs.put(PRIMARY, timed("g2", "2026-03-07T19:00:00-08:00", "2026-03-07T22:00:00-08:00", summary="Dinner with friends"))
    tok = seed_whoop(settings, ws)
    seed_google(settings, gs)
    return settings, tok


def q(settings, sql: str, params=None) -> list[tuple]:
    with open_db(settings.database, read_only=True) as db:
        return db.query(sql, params)[1]


def status_of(results) -> dict[str, str]:
    return {r.job: "ok" if r.ok else "failed" for r in results}


# -- one full cycle ----------------------------------------------------------------------------
def test_full_cycle_syncs_maps_and_recommends(env):
    settings, tok = env
    results = daemon.run_once(settings, day=LAST_DAY)
    assert status_of(results) == {"sync:whoop": "ok", "sync:google": "ok", "map": "ok", "recommend": "ok"}
    assert [r.stage for r in results] == ["sync", "sync", "map", "recommend"]
    assert q(settings, "SELECT count(*) FROM sleep_sessions WHERE source = 'whoop'") == [(10,)]
    assert q(settings, "SELECT count(*) FROM events WHERE source = 'google'") == [(2,)]
    assert q(settings, "SELECT count(*) > 0 FROM meters") == [(True,)]
    assert q(settings, "SELECT count(*) > 0 FROM slot_actions") == [(True,)]
    assert q(settings, "SELECT count(*) > 0 FROM recommendations WHERE local_day = ?", [LAST_DAY]) == [(True,)]
    assert q(settings, "SELECT kind, source, ok FROM runs ORDER BY id") == [
        ("sync", "whoop", True), ("sync", "google", True), ("map", None, True), ("recommend", None, True)]
    plan = results[-1]
    assert plan.plan is not None and plan.detail["slots"] and all(s["action"] for s in plan.detail["slots"])
    assert all(len(s["belief"]) == 3 for s in plan.detail["slots"])
    # the log has the cycle, and no token ever reaches it
    text = (settings.logs_dir / daemon.LOG_FILE).read_text()
    assert "sync:whoop: ok" in text and "recommend: ok" in text
    assert tok["access_token"] not in text and tok["refresh_token"] not in text
    assert lock.acquire(settings.home, "test")  # released after the cycle
    lock.release(settings.home)


def test_a_failing_source_does_not_stop_the_others(env, servers, run_cli):
    settings, tok = env
    ws, _ = servers
    ws.faults["/v2/activity/workout"] = [Reply(500)] * 50  # WHOOP is melting
    code, out, err = run_cli("daemon", "--once", "--json")
    assert code == 1
    results = {r["job"]: r for r in json.loads(out)}
    assert results["sync:whoop"]["ok"] is False and "HTTP 500" in results["sync:whoop"]["error"]
    assert all(results[j]["ok"] for j in ("sync:google", "map", "recommend"))
    assert "sync:whoop" in err and tok["access_token"] not in out + err
    # the error is recorded where `rhythm status` reads it, and the cursor did not move
    assert q(settings, "SELECT DISTINCT last_error LIKE '%HTTP 500%' FROM sync_state WHERE source = 'whoop'") == [(True,)]
    assert q(settings, "SELECT count(*) FROM sleep_sessions WHERE source = 'whoop'") == [(0,)]
    assert q(settings, "SELECT count(*) FROM events") == [(2,)]
    code, out, _ = run_cli("status", "--json")
    st = {s["source"]: s for s in json.loads(out)["sources"]}
    assert "HTTP 500" in st["whoop"]["last_error"] and st["google"]["last_error"] is None
    assert st["google"]["last_sync"] is not None and st["google"]["rows"]["events"] == 2


def test_a_crashing_stage_is_contained_and_recorded(env, monkeypatch):
    settings, _ = env
    real = daemon.sync_step

    def flaky(s, source):
        if source == "whoop":
            raise RuntimeError("connector bug")
        return real(s, source)

    monkeypatch.setattr(daemon, "sync_step", flaky)
    results = daemon.run_cycle(settings, day=LAST_DAY)
    assert status_of(results) == {"sync:whoop": "failed", "sync:google": "ok", "map": "ok", "recommend": "ok"}
    assert results[0].error == "RuntimeError: connector bug"
    assert q(settings, "SELECT kind, source, ok, summary->>'error' FROM runs WHERE NOT ok") == [
        ("sync", "whoop", False, "RuntimeError: connector bug")]


# -- the schedule ------------------------------------------------------------------------------
def test_scheduler_has_one_sync_job_per_source_and_the_morning_run(rhythm_home):
    settings = load_settings(sync_every_hours=3, morning_run_time="06:45", timezone="Europe/Amsterdam")
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    last = {"whoop": now - timedelta(hours=1)}
    sched = daemon.build_scheduler(settings, sources=["whoop", "google"], now=now)
    specs = {s.id: s for s in daemon.job_specs(settings, ["whoop", "google"], now, last)}
    sched.start(paused=True)
    try:
        jobs = {j.id: j for j in sched.get_jobs()}
        assert set(jobs) == {"sync:whoop", "sync:google", "morning"}
        for j in jobs.values():
            assert j.coalesce is True and j.max_instances == 1 and j.misfire_grace_time >= 3600
        assert jobs["morning"].misfire_grace_time == daemon.MORNING_MISFIRE_GRACE_S
        whoop = jobs["sync:whoop"].trigger
        assert isinstance(whoop, IntervalTrigger) and whoop.interval == timedelta(hours=3)
        morning = jobs["morning"].trigger
        assert isinstance(morning, CronTrigger) and str(morning.timezone) == "Europe/Amsterdam"
        assert {f.name: str(f) for f in morning.fields}["hour"] == "6"
        assert {f.name: str(f) for f in morning.fields}["minute"] == "45"
        assert jobs["sync:whoop"].func is daemon.sync_job and jobs["morning"].func is daemon.morning_job
        assert sched._executors["default"]._pool._max_workers == 1  # one writer: jobs in turn
    finally:
        sched.shutdown(wait=False)
    ams = ZoneInfo("Europe/Amsterdam")
    # whoop synced an hour ago: due two hours from now; google never synced: due now
    assert specs["sync:whoop"].next_run(now) == (now + timedelta(hours=2)).astimezone(ams)
    assert specs["sync:google"].next_run(now) == now.astimezone(ams)
    assert specs["morning"].next_run(now) == datetime(2026, 3, 11, 6, 45, tzinfo=ams)


@pytest.mark.parametrize("field,value,message", [
    ("morning_run_time", "7am", "morning_run_time: expected (a time as )?HH:MM"),
    ("morning_run_time", "24:00", "morning_run_time: expected (a time as )?HH:MM"),
    ("sync_every_hours", 0, "sync_every_hours: (must be > 0|0.0 is outside)"),
    ("timezone", "Mars/Olympus", "timezone: unknown zone"),
])
def test_bad_schedule_settings_are_config_errors(rhythm_home, field, value, message):
    # refused as the settings load (issue 41: ranges and zones, not just types)
    with pytest.raises(ConfigError, match=message):
        daemon.job_specs(load_settings(**{field: value}), ["whoop"], datetime.now(UTC), {})


def test_logs_rotate_and_never_show_secrets(rhythm_home):
    settings = load_settings()
    handlers = daemon.setup_logging(settings)
    try:
        fh = handlers[0]
        assert fh.maxBytes == daemon.LOG_MAX_BYTES and fh.backupCount == daemon.LOG_BACKUPS
        daemon.log.warning("POST token: refresh_token=ref-123abc&client_secret=s3cret Authorization: Bearer acc-9f9f")
        daemon.log.error('body {"access_token": "acc-77", "code": "xyz"}')
    finally:
        daemon.teardown_logging(handlers)
    text = (settings.logs_dir / daemon.LOG_FILE).read_text()
    for secret in ("ref-123abc", "s3cret", "acc-9f9f", "acc-77", "xyz"):
        assert secret not in text
    assert text.count("***") == 5


# -- the long-running daemon -------------------------------------------------------------------
def _wait_for(pred, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out")


@pytest.mark.slow
def test_sigterm_stops_the_daemon_cleanly_and_the_lock_keeps_other_writers_out(rhythm_home, run_cli):
    settings = load_settings()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rhythm", "daemon"], cwd=REPO, env=os.environ.copy(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        state = _wait_for(lambda: (daemon.read_state(settings) or {}).get("running") and daemon.read_state(settings))
        assert state["pid"] == proc.pid and [j["id"] for j in state["jobs"]] == ["morning"]
        # while it runs, it is the only writer
        code, _, err = run_cli("import", "ics", SAMPLE_ICS)
        assert code == 75 and "database busy" in err and "rhythm daemon" in err
        code, _, err = run_cli("daemon", "--once")  # nor does a second daemon start
        assert code == 75 and "database busy" in err
        code, out, _ = run_cli("status", "--json")
        st = json.loads(out)
        assert st["daemon"]["running"] is True and st["schedule"][0]["by"] == "daemon"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "morning" in out
    assert lock.acquire(settings.home, "test")  # released
    lock.release(settings.home)
    assert daemon.read_state(settings)["status"] == "stopped"
    log_text = (settings.logs_dir / daemon.LOG_FILE).read_text()
    assert "received SIGTERM" in log_text and "daemon stopped" in log_text
    # and now a manual import goes through
    assert run_cli("import", "ics", SAMPLE_ICS)[0] == 0


def test_local_today_uses_the_configured_zone(rhythm_home):
    late = datetime(2026, 3, 10, 23, 30, tzinfo=UTC)
    assert local_today(load_settings(timezone="Europe/Amsterdam"), late) == date(2026, 3, 11)
    assert local_today(load_settings(timezone="America/Los_Angeles"), late) == date(2026, 3, 10)
