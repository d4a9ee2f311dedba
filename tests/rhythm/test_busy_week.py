"""A busy week through the real product: .ics import, wearable data, map, recommend, answers.

The day (Wednesday 19 November 2025, Berlin, after two short nights): stand-up 09:00, 1:1
10:00, an offsite 12:00-18:00, choir 19:00-21:00; a transparent hold, a cancelled review and
an all-day holiday that must not count.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from lab.people.busy_week import TZ, WEDNESDAY, wearable_records, write_ics
from rhythm import jobs
from rhythm.settings import load_settings
from storage import open_db
from storage.writer import write_records

NOW = datetime(2025, 11, 19, 6, 50, tzinfo=TZ)


@pytest.fixture
def person(rhythm_home, tmp_path):
    settings = load_settings(timezone="Europe/Berlin")
    with open_db(settings.database) as db:
        write_records(db, wearable_records())
    jobs.import_file(settings, "ics", write_ics(tmp_path))
    jobs.map_data(settings, now=NOW)
    return settings


def _overlap(a0, a1, b0, b1) -> bool:
    return a0 < b1 and b0 < a1


def test_the_plan_fits_the_busy_day(person):
    plan = jobs.recommend(person, now=NOW).to_dict()
    titles = [c["title"] for c in plan["commitments"]]
    assert titles == ["Team stand-up", "1:1 with Sam", "Offsite Q4 planning", "Choir rehearsal"]
    assert plan["timezone"] == "Europe/Berlin"
    assert "afternoon" in plan["fixed_slots"]
    spans = [(datetime.fromisoformat(c["start"]), datetime.fromisoformat(c["end"])) for c in plan["commitments"]]
    assert plan["recommendations"]
    for rec in plan["recommendations"]:
        s, e = datetime.fromisoformat(rec["start"]), datetime.fromisoformat(rec["end"])
        assert rec["start"].endswith("+01:00") and s < e
        assert rec["slot"] != "afternoon"
        if rec["kind"] != "bedtime":
            assert not any(_overlap(s, e, a, b) for a, b in spans), rec
            assert s >= NOW
        assert rec["evidence"] and any(ch.isdigit() for ch in rec["evidence"][0])
        assert rec["expected_effect"]
    night = [r for r in plan["recommendations"] if r["slot"] == "night"][0]
    assert night["action"] == "SLEEP" and datetime.fromisoformat(night["start"]) >= spans[-1][1]
    evidence = " ".join(e for r in plan["recommendations"] for e in r["evidence"])
    assert "two short nights" in evidence or "HRV" in evidence  # her own numbers


@pytest.mark.slow
def test_ignoring_every_block_three_times_changes_the_plan(person):
    first = jobs.recommend(person, now=NOW)
    before = {s.slot: s.action for s in first.slots if s.kind != "bedtime"}
    plan = first
    for _ in range(3):
        for s in plan.slots:
            if s.kind != "bedtime":
                jobs.feedback(person, s.id, "ignore")
        plan = jobs.recommend(person, now=NOW)
    after = {s.slot: s.action for s in plan.slots if s.kind != "bedtime"}
    assert before and any(after.get(slot) != action for slot, action in before.items()), (before, after)
    assert plan.feedback_used >= 3 * len(before)
    assert any("you ignored" in e for s in plan.slots for e in s.evidence)


def test_recommend_json_and_timeline_through_the_cli(person, run_cli, monkeypatch):
    monkeypatch.setenv("RHYTHM_TIMEZONE", "Europe/Berlin")
    code, out, err = run_cli("recommend", "--date", WEDNESDAY.isoformat(), "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["day"] == WEDNESDAY.isoformat() and plan["fixed_slots"] == ["afternoon"]
    code, out, err = run_cli("recommend", "--date", WEDNESDAY.isoformat())
    assert code == 0, err
    assert "Plan for Wednesday 19 Nov 2025 (Europe/Berlin)" in out
    assert "12:00-18:00  Offsite Q4 planning" in out and "19:00-21:00  Choir rehearsal" in out
    assert "fixed by your calendar: afternoon" in out
    assert "Focus time (hold)" not in out and "Design review" not in out


def test_a_recurring_calendar_of_an_old_export_meets_its_own_data(rhythm_home, tmp_path):
    """The .ics is expanded over the wearable data's period, whatever its year (a 2021
    export met no 2021 occurrences with a window around today)."""
    settings = load_settings(timezone="Europe/Berlin")
    old = [r for r in wearable_records()]
    shift = timedelta(days=-1600)  # mid-2021
    moved = []
    for r in old:
        kw = {f: getattr(r, f) for f in r.__slots__}
        kw["start_ts"] += shift
        kw["end_ts"] += shift
        kw["local_day"] += shift
        moved.append(type(r)(**kw))
    with open_db(settings.database) as db:
        write_records(db, moved)
    ics = tmp_path / "old.ics"
    ics.write_text(write_ics(tmp_path).read_text().replace("DTSTART;TZID=Europe/Berlin:20251027T090000",
                                                           "DTSTART;TZID=Europe/Berlin:20210104T090000")
                   .replace("DTEND;TZID=Europe/Berlin:20251027T091500", "DTEND;TZID=Europe/Berlin:20210104T091500"))
    jobs.import_file(settings, "ics", ics)
    first = (WEDNESDAY - timedelta(days=21) + shift)
    with open_db(settings.database, read_only=True) as db:
        _, rows = db.query("SELECT count(*) FROM events WHERE title = 'Team stand-up' AND local_day BETWEEN ? AND ?",
                           [first, WEDNESDAY + shift])
    assert rows[0][0] >= 15  # every weekday of the old data's weeks


def test_an_invitation_the_owner_declined_is_no_commitment(rhythm_home, tmp_path):
    """.ics invitations: with `calendar_owner_emails` set, the owner's PARTSTAT=DECLINED makes
    the event no commitment (without the setting an .ics cannot say who "self" is)."""
    invite = write_ics(tmp_path).read_text().replace("END:VCALENDAR", "\r\n".join([
        "BEGIN:VEVENT", "UID:party@busy.week", "SUMMARY:Launch party",
        "DTSTART;TZID=Europe/Berlin:20251119T213000", "DTEND;TZID=Europe/Berlin:20251119T233000",
        "ATTENDEE;PARTSTAT=DECLINED:mailto:Me@Example.org", "ATTENDEE;PARTSTAT=ACCEPTED:mailto:host@example.org",
        "END:VEVENT", "END:VCALENDAR"]))
    path = tmp_path / "invite.ics"
    path.write_text(invite)
    for owners, declined in ((None, False), ("me@example.org, other@example.org", True)):
        settings = load_settings(timezone="Europe/Berlin", calendar_owner_emails=owners)
        with open_db(settings.database) as db:
            write_records(db, wearable_records())
        jobs.import_file(settings, "ics", path)
        plan = jobs.recommend(settings, now=NOW).to_dict()
        titles = [c["title"] for c in plan["commitments"]]
        assert ("Launch party" not in titles) == declined, (owners, titles)
        with open_db(settings.database, read_only=True) as db:
            _, rows = db.query("SELECT self_response FROM events WHERE title = 'Launch party'")
        assert rows == [("declined" if declined else None,)]
