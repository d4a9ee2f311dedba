"""One time zone: the person's configured zone decides "today" for meters, slot actions, the
plan, the report and the daemon, whatever zone the process runs in, across a DST change.

The process runs in New York; the person lives in Berlin. Berlin moves its clocks forward at
01:00 UTC on Sunday 30 March 2025 (New York did on 9 March). "Now" is 22:30 UTC on 30 March:
00:30 on Monday 31 March in Berlin (the night of the 30th), 18:30 on the 30th in New York.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from common.records import Event, Sample, SleepSession
from rhythm import daemon, jobs
from rhythm.report import write_report
from rhythm.settings import load_settings, local_today, user_zone
from storage import open_db
from storage.writer import write_records

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2025, 3, 30, 22, 30, tzinfo=UTC)
MON = date(2025, 3, 31)


@pytest.fixture
def new_york_process(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _records():
    """Two weeks of sleep and steps (steps without an offset of their own), and calendar
    events in Berlin time, ending the day after "today"."""
    for i in range(16):
        d = date(2025, 3, 18) + timedelta(days=i)
        bed = datetime(d.year, d.month, d.day, 23, 0, tzinfo=BERLIN) - timedelta(days=1)
        wake = datetime(d.year, d.month, d.day, 7, 0, tzinfo=BERLIN)
        off = int(wake.utcoffset().total_seconds() // 60)
        yield SleepSession("whoop", f"s{i}", bed, wake, d, sleep_min=(wake - bed).total_seconds() / 60 - 20,
                           in_bed_min=(wake - bed).total_seconds() / 60, tz_offset_min=off)
        yield Sample("whoop", "hrv_rmssd", wake, wake, 50.0 + i % 3, "ms", d, tz_offset_min=off)
        for h in (12.5, 18.5, 22.5):  # a wearable that stores UTC instants without an offset
            t = datetime(d.year, d.month, d.day, tzinfo=BERLIN) + timedelta(hours=h)
            yield Sample("garmin", "steps", t, t + timedelta(minutes=20), 1000.0 + 10 * h, "count", d)
        if d.weekday() < 5:
            start = datetime(d.year, d.month, d.day, 9, 0, tzinfo=BERLIN)
            yield Event("calendar", "primary", f"standup-{d}", start, start + timedelta(minutes=30), False, d,
                        title="Team stand-up", attendees_count=6, timezone="Europe/Berlin")


def test_the_whole_day_follows_the_configured_zone_not_the_process_zone(rhythm_home, new_york_process):
    settings = load_settings(timezone="Europe/Berlin")
    assert time.localtime(NOW.timestamp()).tm_mday == 30  # the process is in New York ...
    assert local_today(settings, NOW) == MON  # ... the person in Berlin, where it is already Monday
    assert user_zone(load_settings()).key == "America/New_York"  # no zone configured: the machine's

    with open_db(settings.database) as db:
        write_records(db, _records())

    summary = jobs.map_data(settings, now=NOW)
    assert summary["last_day"] == MON.isoformat()  # mapped up to Berlin's today, not New York's
    with open_db(settings.database, read_only=True) as db:
        _, rows = db.query("SELECT max(local_day) FROM meters")
        assert rows == [(MON,)]
        # Monday's stand-up at 09:00 Berlin (CEST, after the change) is a morning meeting ...
        _, rows = db.query("SELECT action FROM slot_actions WHERE local_day = ? AND slot = 'morning'", [MON])
        assert rows == [("ADMIN_WORK",)]
        # ... and the steps stored without an offset land in Berlin's slots on both sides of
        # the change (the zone's offset on that day, not one offset for the range): 12:30 is
        # the afternoon, 18:30 and 22:30 the evening (in winter time on a summer day, 12:30
        # would be 11:30, the morning; in New York time, 06:30, also the morning).
        for d in (date(2025, 3, 28), MON):
            _, rows = db.query(
                "SELECT slot, CAST(evidence->'$.vitality.signals.steps.value' AS DOUBLE) FROM meters "
                "WHERE local_day = ?", [d])
            steps = dict(rows)
            assert (steps["morning"], steps["afternoon"], steps["evening"]) == (0.0, 1125.0, 2410.0), d

    plan = jobs.recommend(settings, now=NOW)
    # 00:30 on Monday in Berlin is still Sunday's night: the plan is for that night only
    # (in New York it would be Sunday evening and night).
    assert plan.day == date(2025, 3, 30)
    assert [s.slot for s in plan.slots] == ["night"]

    report = write_report(settings, now=NOW)
    assert report.path.name == f"report-{MON}.html"

    specs = {s.id: s for s in daemon.job_specs(settings, [], NOW, {})}
    nxt = specs["morning"].next_run(NOW)
    assert nxt.astimezone(BERLIN).replace(tzinfo=None) == datetime(2025, 3, 31, 7, 0)
    assert nxt.utcoffset() == timedelta(hours=2)  # summer time already


@pytest.mark.slow
def test_the_machine_zone_is_used_consistently_when_none_is_configured(rhythm_home, new_york_process):
    settings = load_settings()
    assert local_today(settings, NOW) == date(2025, 3, 30)
    with open_db(settings.database) as db:
        write_records(db, _records())
    summary = jobs.map_data(settings, now=NOW)
    assert summary["last_day"] == "2025-03-30"
    plan = jobs.recommend(settings, now=NOW)
    assert plan.day == date(2025, 3, 30) and [s.slot for s in plan.slots] == ["evening", "night"]
    assert write_report(settings, now=NOW).path.name == "report-2025-03-30.html"


def test_an_unknown_zone_is_one_clear_error(rhythm_home, run_cli):
    (rhythm_home / "config.toml").write_text('timezone = "Mars/Olympus"\n')
    code, _, err = run_cli("map")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Mars/Olympus" in err


def test_a_fixed_offset_row_keeps_its_own_offset(rhythm_home):
    """Rows with their own UTC offset (a trip to New York) are shown in that local time."""
    settings = load_settings(timezone="Europe/Berlin")
    ny = timezone(timedelta(hours=-4))
    d = date(2025, 4, 2)
    rec = [Sample("apple", "steps", datetime(2025, 4, 2, 10, tzinfo=ny), datetime(2025, 4, 2, 11, tzinfo=ny),
                  5000.0, "count", d, tz_offset_min=-240)]
    with open_db(settings.database) as db:
        write_records(db, rec)
    jobs.map_data(settings, now=datetime(2025, 4, 3, 12, tzinfo=UTC))
    with open_db(settings.database, read_only=True) as db:
        _, rows = db.query(
            "SELECT slot FROM meters WHERE local_day = ? AND evidence->>'$.signals_present' LIKE '%steps%'", [d])
    assert {r[0] for r in rows} >= {"morning"}
