"""`rhythm label`, `rhythm map` with labels, learned labels and the recommend note, end to end
on a generated person (lab/people/label_people.py) in a real DuckDB under RHYTHM_HOME."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from lab.people.label_people import START, person
from rhythm.settings import load_settings
from storage import open_db
from storage.writer import write_records

SEED = 3


@pytest.fixture
def home(rhythm_home, run_cli):
    p = person(SEED, days=28)
    settings = load_settings()
    with open_db(settings.database) as db:
        write_records(db, p.records)
    code, _, err = run_cli("map")
    assert code == 0, err
    return settings, p


def q(settings, sql, params=None):
    with open_db(settings.database, read_only=True) as db:
        return db.con.execute(sql, params or []).fetchall()


def other_title(p):
    return next(t for t, k in p.kinds.items() if k == "other")


def test_a_persons_label_overrides_the_table_for_the_title_and_its_series_and_survives_map(home, run_cli):
    settings, p = home
    title = other_title(p)
    assert q(settings, "SELECT DISTINCT action FROM events WHERE title = ?", [title]) == [(None,)]
    # a renamed occurrence of the same series
    with open_db(settings.database) as db:
        db.con.execute("UPDATE events SET title = 'Abgesagt?' WHERE event_id = (SELECT min(event_id) FROM events "
                       "WHERE title = ?)", [title])
    code, out, err = run_cli("label", title.upper() + "!", "socialize")
    assert code == 0, err
    assert out.startswith(f"stored: {title.upper()}! -> SOCIALIZE (your label)") and len(out.strip().splitlines()) == 1
    rows = q(settings, "SELECT title, action, action_source FROM events WHERE recurring_event_id = "
                       "(SELECT any_value(recurring_event_id) FROM events WHERE title = ?)", [title])
    assert len(rows) == 4 and {(a, s) for _, a, s in rows} == {("SOCIALIZE", "label")}
    assert "Abgesagt?" in {t for t, _, _ in rows}  # by its series
    # the keyword table says nothing about it; the slot's evidence says where the action came from
    evidence = [json.loads(e) for (e,) in q(settings, "SELECT evidence FROM slot_actions WHERE action = 'SOCIALIZE'")]
    assert any(e.get("source") == "your label" for e in evidence)

    code, _, err = run_cli("map")  # rebuilt from stored data: the label stays
    assert code == 0, err
    assert {a for (a,) in q(settings, "SELECT action FROM events WHERE recurring_event_id IN (SELECT "
                                      "recurring_event_id FROM events WHERE title = ?)", [title])} == {"SOCIALIZE"}
    # it lives in the person's database, not in the package: a new process sees it
    code, out, _ = run_cli("label", "--list", "--json")
    mine = [r for r in json.loads(out) if r["origin"] == "your label"]
    assert mine == [{"pattern": title.upper() + "!", "action": "SOCIALIZE", "origin": "your label", "evidence": None}]


@pytest.mark.slow
def test_a_second_label_replaces_the_first_and_remove_gives_the_title_back_to_the_table(home, run_cli):
    settings, p = home
    title = other_title(p)
    run_cli("label", title, "SOCIALIZE")
    code, out, _ = run_cli("label", title.lower(), "learn")
    assert code == 0 and out.startswith("replaced:")
    assert q(settings, "SELECT count(*) FROM labels WHERE origin = 'you'") == [(1,)]
    assert q(settings, "SELECT DISTINCT action FROM events WHERE title = ?", [title]) == [("LEARN",)]
    code, out, err = run_cli("label", "--remove", title)
    assert code == 0, err
    assert q(settings, "SELECT DISTINCT action, action_source FROM events WHERE title = ?", [title]) == [(None, None)]
    code, _, err = run_cli("label", "--remove", title)
    assert code != 0 and len(err.strip().splitlines()) == 1 and "no label of yours" in err


@pytest.mark.parametrize("args", [("Velmora", "WALKING"), ("Velmora", ""), ("***", "EXERCISE"), ("Velmora",)])
def test_bad_input_is_one_line_and_the_database_is_as_before(home, run_cli, args):
    settings, _ = home
    before = q(settings, "SELECT count(*) FROM runs"), q(settings, "SELECT * FROM labels ORDER BY key, origin")
    code, out, err = run_cli("label", *args)
    assert code != 0 and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert (q(settings, "SELECT count(*) FROM runs"), q(settings, "SELECT * FROM labels ORDER BY key, origin")) == before


@pytest.mark.slow
def test_learned_labels_are_listed_with_their_evidence_and_the_persons_label_reverses_them(home, run_cli):
    settings, p = home
    code, out, _ = run_cli("label", "--suggested", "--json")
    learned = {r["pattern"]: r for r in json.loads(out)}
    exercise = [t for t, k in p.kinds.items() if k == "exercise" and learned.get(t, {}).get("origin") == "learned"]
    assert exercise, learned
    t = exercise[0]
    assert learned[t]["action"] == "EXERCISE" and " times a workout overlapped" in learned[t]["evidence"]
    for r in learned.values():  # nothing learned wrong for this person
        assert r["action"] == p.truth[r["pattern"]] or r["origin"] == "proposed"
    assert {s for (s,) in q(settings, "SELECT DISTINCT action_source FROM events WHERE title = ?", [t])} == {"learned"}
    code, out, err = run_cli("label", t, "NONE")  # "not an action": the person's word wins
    assert code == 0, err
    assert q(settings, "SELECT DISTINCT action, action_source FROM events WHERE title = ?", [t]) == [(None, "label")]
    run_cli("map")
    assert q(settings, "SELECT count(*) FROM labels WHERE origin = 'learned' AND key = lower(?)", [t]) == [(0,)]
    assert q(settings, "SELECT DISTINCT action FROM events WHERE title = ?", [t]) == [(None,)]


def test_recommend_notes_the_titles_it_could_not_label_and_how_to_label_them(home):
    from rhythm.recommend import unlabelled_note

    settings, p = home
    day = START + timedelta(days=21)
    with open_db(settings.database) as db:
        note = unlabelled_note(db, day)
    assert note is not None and 'rhythm label "TITLE" ACTION' in note
    upcoming = {t for (t,) in q(settings, "SELECT DISTINCT title FROM events WHERE local_day BETWEEN ? AND ?",
                                [day, day + timedelta(days=2)])}
    unknown = {t for t in upcoming if t in p.kinds and p.kinds[t] == "other"}
    assert unknown and all(f'"{t}"' in note for t in unknown)
    assert "Daily standup" not in note and "Focus time" not in note


def test_the_report_marks_the_slots_a_label_decided():
    from datetime import UTC, date, datetime

    from rhythm.report import ReportData, section_did

    d = date(2024, 1, 10)
    data = ReportData(today=d, start=d, generated_at=datetime.now(UTC), database="x", slot_actions=[
        {"local_day": d, "slot": "evening", "action": "SOCIALIZE", "confidence": 0.9,
         "evidence": json.dumps({"rule": "calendar", "source": "your label"})},
        {"local_day": d, "slot": "morning", "action": "EXERCISE", "confidence": 0.9,
         "evidence": json.dumps({"rule": "calendar", "source": "learned from your devices"})},
        {"local_day": d, "slot": "afternoon", "action": "ADMIN_WORK", "confidence": 0.9,
         "evidence": json.dumps({"rule": "calendar"})},
    ])
    html, has, _ = section_did(data)
    assert has and "SOCIALIZE (your label)" in html and "EXERCISE (learned)" in html
    assert "ADMIN_WORK (" not in html
