"""`rhythm status`: sources with their last sync or import, cursors, errors and rows; the
daemon; the next runs. Never fails on a missing or busy database."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common.errors import DatabaseBusy
from connectors.oauth import FileTokenStore
from rhythm import daemon, status
from rhythm.jobs import import_file
from rhythm.settings import load_settings
from storage import open_db

SAMPLE = Path(__file__).resolve().parents[2] / "rhythm" / "data" / "sample"


def test_fresh_home_has_no_sources_and_the_morning_run_scheduled(rhythm_home, run_cli):
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    st = status.pipeline_status(load_settings(timezone="Europe/Amsterdam", morning_run_time="07:30"), now)
    assert st["database_state"] == "missing" and st["sources"] == [] and st["daemon"]["running"] is False
    (job,) = st["schedule"]
    assert job["job"] == "morning" and job["by"] == "if the daemon starts now"
    assert job["next_run"] == datetime(2026, 3, 11, 6, 30, tzinfo=UTC)
    code, out, _ = run_cli("status")
    assert code == 0 and "no sources yet" in out and "morning" in out


def test_sources_show_imports_syncs_cursors_errors_and_rows(rhythm_home, run_cli, monkeypatch):
    from rhythm.cli._common import console

    monkeypatch.setattr(console, "width", 220)
    settings = load_settings()
    import_file(settings, "whoop", SAMPLE / "whoop_export.zip")
    import_file(settings, "ics", SAMPLE / "calendar.ics")
    FileTokenStore(settings.tokens_dir).save("google", {"access_token": "a", "refresh_token": "r"})
    ok_at = datetime.now(UTC) - timedelta(hours=2)
    with open_db(settings.database) as db:
        db.set_cursor("google", "primary", "sync-token-1")
        db.set_cursor("whoop", "cycle", "2026-03-01T03:00:00.000Z", error="whoop: HTTP 500 after 3 retries")
        db.con.execute("INSERT INTO runs (kind, source, target, started_at, finished_at, ok, summary) VALUES "
                       "('sync', 'google', 'api', ?, ?, true, '{}'), "
                       "('sync', 'whoop', 'api', ?, ?, false, '{\"error\": \"whoop: HTTP 500 after 3 retries\"}')",
                       [ok_at, ok_at, ok_at, ok_at])
    st = status.pipeline_status(settings)
    by = {s["source"]: s for s in st["sources"]}
    assert set(by) == {"google", "whoop", "calendar"}
    assert by["google"]["kind"] == "api" and by["google"]["last_sync"] == ok_at and by["google"]["last_error"] is None
    assert by["google"]["streams"][0]["cursor"] == "sync-token-1"
    assert by["whoop"]["kind"] == "api" and by["whoop"]["last_error"] == "whoop: HTTP 500 after 3 retries"
    assert by["whoop"]["last_import"] is not None and by["whoop"]["rows"]["sleep_sessions"] == 40
    assert by["calendar"]["kind"] == "file" and by["calendar"]["rows"]["events"] == 220
    assert by["calendar"]["last_import"] is not None  # `rhythm import ics` lands as source "calendar"
    # google synced two hours ago: due in sync_every_hours - 2 from now
    sched = {j["job"]: j for j in st["schedule"]}
    assert set(sched) == {"sync:google", "morning"}
    due = sched["sync:google"]["next_run"] - ok_at
    assert abs(due - timedelta(hours=settings.sync_every_hours)) < timedelta(seconds=5)
    code, out, _ = run_cli("status", "--json")
    assert code == 0 and json.loads(out)["sources"][0]["source"] == "google"
    code, out, _ = run_cli("status")
    assert code == 0 and "HTTP 500" in out and "events 220" in out


def test_busy_database_is_reported_not_raised(rhythm_home, monkeypatch):
    settings = load_settings()
    import_file(settings, "ics", SAMPLE / "calendar.ics")

    def busy(*_a, **_k):
        raise DatabaseBusy("database busy: the daemon is writing")

    monkeypatch.setattr(status, "open_db", busy)
    st = status.pipeline_status(settings)
    assert st["database_state"] == "busy" and "database busy" in st["problems"][0]
    assert st["schedule"]


def test_daemon_state_is_checked_against_its_pid(rhythm_home):
    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    daemon.write_state(settings, {"status": "running", "pid": os.getpid(), "jobs": [
        {"id": "morning", "next_run": "2026-03-11T07:00:00+01:00", "describe": "x"}]})
    st = status.pipeline_status(settings)
    assert st["daemon"]["running"] is True and st["schedule"] == [
        {"job": "morning", "next_run": "2026-03-11T07:00:00+01:00", "describe": "x", "by": "daemon"}]
    daemon.write_state(settings, {"status": "running", "pid": 2**22 + 12345, "jobs": []})  # no such process
    assert status.pipeline_status(settings)["daemon"]["running"] is False
