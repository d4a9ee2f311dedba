"""Work patterns (issue 36): shifts, on-call, rotas and duty are work in every language we
read; "day" / "día" / "Tag" never make a shift a holiday; holds are never counted as done."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from common.records import Event
from mapping.actions import classify_event, counts_as_done, is_tentative_title

SHIFTS = [
    # English
    "Night shift", "Day shift", "On call", "Rota: ward 4", "Early shift", "Night duty",
    # Spanish
    "Turno de noche", "Turno de día", "Guardia", "Guardia 24h", "Turno de tarde",
    # German
    "Schicht", "Nachtdienst", "Dienst", "Frühschicht", "Tagdienst", "Nachtdienst Krankenhaus", "Rufbereitschaft",
    # French
    "Astreinte", "Garde de nuit", "Poste de nuit", "Jour de garde",
]


@pytest.mark.parametrize("title", SHIFTS)
def test_shift_titles_in_four_languages_are_work(title):
    c = classify_event(title)
    assert c.action == "ADMIN_WORK" and c.method == "title"


@pytest.mark.parametrize("title", ["Turno de día", "Tagdienst", "Day shift", "Poste de jour"])
def test_day_in_a_shift_title_is_never_a_holiday(title):
    assert classify_event(title).label != "NONE"


def test_holidays_stay_holidays():
    assert classify_event("Labor Day").label == "NONE"
    assert classify_event("Día de la madre").label == "NONE"


@pytest.mark.parametrize(("title", "held"), [
    ("maybe gym?", True), ("Maybe: yoga", True), ("Vielleicht Yoga", True), ("¿cena con Ana?", True),
    ("peut-être piscine", True), ("Gym", False), ("Mayberry trip", False), ("Yoga class", False),
])
def test_a_hold_is_known_by_its_title(title, held):
    assert is_tentative_title(title) is held


def test_only_confirmed_opaque_accepted_events_count_as_done():
    assert counts_as_done("Gym", "confirmed", "opaque", "accepted")
    assert not counts_as_done("Gym", "confirmed", "transparent", None)
    assert not counts_as_done("Gym", "tentative", None, None)
    assert not counts_as_done("Gym", None, None, "tentative")
    assert not counts_as_done("Gym", "cancelled", None, None)
    assert not counts_as_done("maybe gym?", "confirmed", "opaque", None)


def _home(tmp_path, zone):
    from rhythm.settings import init_home, load_settings

    s = load_settings(home=tmp_path / "home", env={}, timezone=zone, agent_backend="bayes")
    init_home(s)
    return s


def test_shift_hours_count_as_work_and_holds_not_as_done_in_the_meters(tmp_path):
    """Through the product's path (storage writer, `rhythm map`): a Spanish night shift is
    the evening's action and work time; a transparent "maybe gym?" hold and a tentative yoga
    are no exercise."""
    from rhythm import jobs
    from storage import open_db
    from storage.derived import slot_rows
    from storage.writer import write_records

    zone = "America/New_York"
    tz = ZoneInfo(zone)
    s = _home(tmp_path, zone)
    d = date(2025, 3, 4)
    recs = []
    for i in range(7):
        day = d + timedelta(days=i)
        recs.append(Event("calendar", "primary", f"shift{i}", datetime(day.year, day.month, day.day, 19, tzinfo=tz),
                          datetime(day.year, day.month, day.day, 19, tzinfo=tz) + timedelta(hours=13), False, day,
                          title="Turno de noche", timezone=zone))
        recs.append(Event("calendar", "primary", f"hold{i}", datetime(day.year, day.month, day.day, 14, tzinfo=tz),
                          datetime(day.year, day.month, day.day, 15, 30, tzinfo=tz), False, day,
                          title="maybe gym?", transparency="transparent", timezone=zone))
        recs.append(Event("calendar", "primary", f"yoga{i}", datetime(day.year, day.month, day.day, 15, 30, tzinfo=tz),
                          datetime(day.year, day.month, day.day, 17, tzinfo=tz), False, day,
                          title="Yoga class", status="tentative", timezone=zone))
    with open_db(s.database) as db:
        write_records(db, recs)
    jobs.map_data(s, now=datetime(2025, 3, 11, 12, tzinfo=tz))
    with open_db(s.database, read_only=True) as db:
        rows = {(r.day, r.slot): r.action for r in slot_rows(db, d, d + timedelta(days=6))}
        work = db.con.execute(
            "SELECT count(*) FROM events WHERE title = 'Turno de noche' AND action = 'ADMIN_WORK'").fetchone()[0]
    assert work == 7
    for i in range(7):
        day = d + timedelta(days=i)
        assert rows[(day, "evening")] == "ADMIN_WORK"
        assert rows[(day, "night")] == "ADMIN_WORK"  # awake at work, 23:00-06:00
        assert rows[(day, "afternoon")] is None  # the holds are not done
