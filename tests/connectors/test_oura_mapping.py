"""An Oura-only person through `rhythm sync oura` and `rhythm map`: meters from Oura's rows.

Sleep sessions (minutes, stages, efficiency), average HRV and lowest heart rate (on the
session), and workouts are generic inputs of mapping; each day's meters must carry the
values of that day's Oura night."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from connectors.oauth import FileTokenStore
from rhythm.settings import load_settings
from tests.connectors.oura_server import OuraServer, make_days
from tests.loopback import Loopback

pytestmark = pytest.mark.slow  # each test syncs and maps an Oura person first (over 2 s)

DAYS = 21
SLOTS = ("morning", "afternoon", "evening", "night")


def berlin(day: date) -> int:
    """Berlin's UTC offset on ``day`` (minutes): the server's documents carry the offsets of
    the zone the person's settings name, so a workout at 17 h in them is at 17 h in the
    person's day (the server's default offsets move at other dates than Berlin's, which put
    some weeks' workouts an hour earlier, in the afternoon slot)."""
    noon = datetime(day.year, day.month, day.day, 12, tzinfo=ZoneInfo("Europe/Berlin"))
    return int(noon.utcoffset().total_seconds() // 60)


@pytest.fixture
def synced(rhythm_home, run_cli, monkeypatch):
    """21 days of an Oura ring, synced; the server's documents for the checks."""
    now = datetime.now(UTC)
    # the ring's last day is today where the person lives (an hour before UTC midnight it is
    # already tomorrow in Berlin, and the heart rate measured since then makes a 22nd day)
    today = now.astimezone(ZoneInfo("Europe/Berlin")).date()
    with Loopback() as srv:
        days = make_days(
            DAYS, today, offset_of=berlin, until=now - timedelta(minutes=1), seed=11
        )
        server = OuraServer(srv, days)
        monkeypatch.setenv("RHYTHM_OURA_API_BASE", server.api_base)
        monkeypatch.setenv("RHYTHM_TIMEZONE", "Europe/Berlin")
        FileTokenStore(load_settings().tokens_dir).save("oura", {"access_token": server.pat, "kind": "personal"})
        code, _, err = run_cli("sync", "oura")
        assert code == 0, err
        yield server.data


def _meters(run_cli, day: date) -> dict[str, dict]:
    code, out, err = run_cli("meters", "--day", day.isoformat(), "--days", "1", "--json")
    assert code == 0, err
    return {r["slot"]: r for r in json.loads(out)["rows"]}


def _signal(row: dict, meter: str, name: str) -> float | None:
    sig = row["evidence"][meter]["signals"].get(name)
    return None if sig is None else sig["value"]


def test_an_oura_only_person_gets_meters(synced, run_cli):
    code, out, err = run_cli("map", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["days"] == DAYS and summary["slots_with_meters"] == 4 * DAYS
    assert summary["sources"]["wearable_days"] == DAYS
    assert summary["actions"]["SLEEP"] >= DAYS - 1
    assert summary["actions"].get("EXERCISE", 0) >= len(synced["workout"]) - 1
    nights = {d["day"]: d for d in synced["sleep"] if d["type"] == "long_sleep"}
    workout_days = {d["day"] for d in synced["workout"]}
    last = max(date.fromisoformat(d) for d in nights)
    for day in [last - timedelta(days=i) for i in range(1, 8)]:  # a week, past the first baselines
        night = nights[day.isoformat()]
        rows = _meters(run_cli, day)
        assert set(rows) == set(SLOTS) and all(rows[s]["vitality"] is not None for s in SLOTS)
        morning = rows["morning"]
        assert _signal(morning, "vitality", "hrv_rmssd_ms") == night["average_hrv"]
        assert _signal(morning, "vitality", "resting_hr_bpm") == night["lowest_heart_rate"]
        assert _signal(morning, "vitality", "sleep_min") == night["total_sleep_duration"] / 60
        assert _signal(morning, "vitality", "sleep_efficiency_pct") == night["efficiency"]
        exercise = _signal(rows["evening"], "vitality", "exercise_min")
        assert (exercise > 0) == (day.isoformat() in workout_days)  # Oura workouts are at 17-19 h local
        assert rows["night"]["action"] == "SLEEP"


def test_daily_views_show_oura_steps_and_sleep(synced, run_cli):
    code, out, err = run_cli("sql", "--json", "SELECT local_day, steps, sleep_min FROM daily_summary ORDER BY 1")
    assert code == 0, err
    rows = {r["local_day"]: r for r in json.loads(out)}
    for doc in synced["daily_activity"]:
        assert rows[doc["day"]]["steps"] == doc["steps"]
    for night in (d for d in synced["sleep"] if d["type"] == "long_sleep"):
        assert rows[night["day"]]["sleep_min"] == night["total_sleep_duration"] / 60


def test_a_days_steps_count_on_that_day(synced, run_cli):
    """A day-long total (Oura's day runs from 04:00 local) counts on its own day, shared over
    the slots (storage/inputs.py DAY_SHARES), not in the night before."""
    assert run_cli("map")[0] == 0
    doc = synced["daily_activity"][-3]
    rows = _meters(run_cli, date.fromisoformat(doc["day"]))
    assert sum(_signal(rows[s], "vitality", "steps") or 0 for s in SLOTS) == pytest.approx(doc["steps"], abs=1)
