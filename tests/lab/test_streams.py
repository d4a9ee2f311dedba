"""Stream weeks (lab/streams.py): training weeks made through the product's own path must
show the student exactly the prompt ``rhythm recommend`` would show it."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest
from typer.testing import CliRunner

from agent.prompting import FORMAT_V4
from common.records import SLOTS, Event, SleepSession
from lab.streams import person_settings, stream_weeks, synthetic_person
from rhythm.cli.main import app
from rhythm.derive import observation_records
from rhythm.recommend import HISTORY_WEEKS, fixed_lines, model_prompt, person_filters
from rhythm.refine import week_frames
from rhythm.settings import user_zone
from storage import open_db
from training.dataset import v4_text
from training.weeks import week_prompt


def test_people_are_reproducible_and_differ():
    a, b = synthetic_person(11), synthetic_person(11)
    assert [repr(r) for r in a.records] == [repr(r) for r in b.records]
    people = [synthetic_person(s) for s in range(40)]
    assert len({p.zone for p in people}) >= 4
    assert len({type(r).__name__ for p in people for r in p.records}) == 4  # sleep, samples, workouts, events
    sources = {r.source for p in people for r in p.records if isinstance(r, SleepSession)}
    assert len(sources) == 3
    assert len({len(p.records) for p in people}) > 30
    # some people have no calendar at all, some days have no watch
    assert any(not any(isinstance(r, Event) for r in p.records) for p in people)
    for p in people:
        nights = {r.local_day for r in p.records if isinstance(r, SleepSession)}
        assert all(d <= p.last for d in nights)
    assert sum(map(_weekly_calendar, people)) >= 3
    assert sum(_longest(_calendar_gaps(p)) >= 7 for p in people) >= 3
    assert sum(_longest(_nights_missing(p)) >= 4 for p in people) >= 3
    # an irregular calendar (meetings drawn day by day) is not taken for a weekly one
    assert not all(map(_weekly_calendar, (p for p in people if any(isinstance(r, Event) for r in p.records))))


def test_some_people_repeat_one_workday_and_take_a_break_that_empties_progress(tmp_path):
    """A recurring series (the same standup and focus block every weekday) leaves the person's
    own spread of work near zero, so a week off takes the progress meter to its floor, as on
    the real recurring calendars of lab/people/watch_calendar.py; the generator must reach those
    meters, or the student never sees them before a real person shows them."""
    people = [synthetic_person(s) for s in range(40)]
    daily = [p for p in people if _same_workdays(p)]
    assert len(daily) >= 3
    late_break = [p for p in daily if _break_after(p, 21) >= 3]
    assert len(late_break) >= 2
    lowest = []
    for p in late_break:
        s = person_settings(p, tmp_path)
        first = min(r.local_day for r in p.records)
        busy = {r.local_day for r in p.records if isinstance(r, Event)}
        with open_db(s.database) as db:
            rows = observation_records(db, first, p.last, tz=user_zone(s))
        progress = [(date.fromisoformat(i["local_day"]), o["meters"][2]) for o, i in rows if o["meters"][2] is not None]
        on_break = [v for d, v in progress if d.weekday() < 5 and d not in busy and d >= first + timedelta(days=21)]
        at_work = sorted(v for d, v in progress if d.weekday() < 5 and d in busy)
        assert at_work[len(at_work) // 2] > 0.4  # at work the meter sits near or above the middle
        lowest.append(min(on_break))
    assert min(lowest) < 0.05, lowest


def _same_workdays(p) -> bool:
    """Consecutive workdays hold mostly the same event hours (a daily recurring series)."""
    hours = _event_hours(p, lambda r: r.local_day.weekday() < 5 and r.start_ts.hour < 17)
    days = sorted(hours)
    return len(days) >= 8 and _same_share(hours, list(zip(days, days[1:], strict=False))) >= 0.75


def _break_after(p, day: int) -> int:
    """The longest run of days without events from the person's ``day``-th day on."""
    return _longest(_calendar_gaps(p)[day:])


def _weekly_calendar(p) -> bool:
    """A routine: the same weekday holds mostly the same event hours the next week."""
    hours = _event_hours(p, lambda r: True)
    pairs = [(d, d + timedelta(days=7)) for d in hours if d + timedelta(days=7) in hours]
    return len(pairs) >= 5 and _same_share(hours, pairs) >= 0.75


def _event_hours(p, keep) -> dict[date, set[float]]:
    """The start hours of the person's events that ``keep`` accepts, by day."""
    hours: dict[date, set[float]] = {}
    for r in p.records:
        if isinstance(r, Event) and keep(r):
            hours.setdefault(r.local_day, set()).add(r.start_ts.hour + r.start_ts.minute / 60)
    return hours


def _same_share(hours: dict[date, set[float]], pairs: list[tuple[date, date]]) -> float:
    """The share of event hours the two days of each pair have in common."""
    return sum(len(hours[a] & hours[b]) for a, b in pairs) / sum(max(len(hours[a]), len(hours[b])) for a, b in pairs)


def _days(p) -> list[date]:
    first = min(r.local_day for r in p.records)
    return [first + timedelta(days=i) for i in range((p.last - first).days + 1)]


def _calendar_gaps(p) -> list[bool]:
    busy = {r.local_day for r in p.records if isinstance(r, Event)}
    return [d not in busy for d in _days(p)] if busy else []


def _nights_missing(p) -> list[bool]:
    nights = {r.local_day for r in p.records if isinstance(r, SleepSession)}
    return [d not in nights for d in _days(p)]


def _longest(flags: list[bool]) -> int:
    best = run = 0
    for f in flags:
        run = run + 1 if f else 0
        best = max(best, run)
    return best


@pytest.fixture(scope="module")
def person_db(tmp_path_factory):
    person = synthetic_person(5, days=23)
    s = person_settings(person, tmp_path_factory.mktemp("streams"))
    first = min(r.local_day for r in person.records)
    with open_db(s.database) as db:
        weeks = list(stream_weeks(db, s, first, person.last, seed=5))
        yield person, s, db, weeks


@pytest.mark.slow
def test_training_prompt_is_the_products_prompt(person_db):
    person, s, db, weeks = person_db
    tz = user_zone(s)
    assert len(weeks) >= 3
    checked = 0
    for w in weeks:
        monday = date.fromisoformat(w["shape"]["monday"])
        records = observation_records(db, monday - timedelta(weeks=HISTORY_WEEKS), person.last, tz=tz)
        week = [(o, i) for o, i in records if monday <= date.fromisoformat(i["local_day"]) < monday + timedelta(days=7)]
        assert len(week) == len(w["views"]) == len(w["answers"]) == len(w["filters"])
        text, answers = v4_text(w)  # the dataset's encoding accepts the week
        assert len(answers) == len(w["answers"])
        for k, ans in enumerate(w["answers"]):
            day, slot = date.fromisoformat(week[k][1]["local_day"]), SLOTS.index(week[k][1]["slot_name"])
            # each day as the planner framed it that day (the product frames earlier days with
            # today's sleep habits, which can move a commitment's edge slot)
            fixed = fixed_lines([week_frames(db, monday, monday + timedelta(days=j), tz)[-1]
                                 for j in range((day - monday).days + 1)])
            if slot == 3 or any(f["day"] == day.weekday() and f["slot"] == SLOTS[slot] for f in fixed):
                assert ans is None  # bedtime and commitments are never asked
                continue
            assert ans is not None and 0 <= ans["action"] < 10 and len(ans["belief"]) == 3
            if k % 3:
                continue  # every third decision is enough
            upto = [(o, i) for o, i in records if (date.fromisoformat(i["local_day"]), SLOTS.index(i["slot_name"]))
                    <= (day, slot)]
            product = model_prompt(week[: k + 1], fixed, [], FORMAT_V4,
                                   filters=person_filters(upto, [], monday))
            assert week_prompt(w, k, FORMAT_V4)[0] == product
            checked += 1
    assert checked >= 10


@pytest.mark.slow
def test_streams_command_is_deterministic(tmp_path):
    runner = CliRunner()
    outs = []
    for name in ("a", "b"):
        r = runner.invoke(app, ["train", "streams", "--out", str(tmp_path / name), "--people", "2",
                                "--seed-start", "7", "--json"])
        assert r.exit_code == 0, r.output
        outs.append((tmp_path / name / "rollouts.jsonl").read_text())
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["people"] == 2 and summary["weeks"] == len(outs[-1].splitlines()) > 0
        assert summary["decisions"] == sum(c for c in summary["teacher_actions"].values())
    assert outs[0] == outs[1]
    rec = json.loads(outs[0].splitlines()[0])
    assert rec["format"] == "rhythm-rollouts/2" and rec["context"]["observe"] == "noisy"


@pytest.mark.slow
@pytest.mark.ml
def test_stream_weeks_encode_with_every_target(person_db):
    """Every asked slot is a target in the encoded week, the last one too when the week
    ends at a decision (the person's data stops mid-week)."""
    from training.dataset import encode_inserted, train_tokenizer

    weeks = person_db[3]
    # a week cut after an asked slot: the data stop there, the text ends at that decision
    w = weeks[0]
    k = max(i for i, a in enumerate(w["answers"][:20]) if a is not None)
    cut = {**w, "views": w["views"][: k + 1], "answers": w["answers"][: k + 1], "filters": w["filters"][: k + 1]}
    texts = [v4_text(x) for x in [*weeks, cut]]
    tok = train_tokenizer([t + "\n".join(a for a in ans if a) for t, ans in texts], 400)
    for text, answers in texts:
        ids, mask, hide = encode_inserted(tok, text, answers)
        targets = [k for k, a in enumerate(answers) if a is not None]
        starts = [i for i in range(1, len(mask)) if mask[i] and not mask[i - 1]]
        assert len(starts) == len(targets)
        assert text.endswith(":")  # every stream week ends at a decision (a bedtime, or the cut)
    assert texts[-1][1][-1] is not None
    assert tok.decode([int(i) for i in ids[starts[-1]:]]).replace(" ", "") == texts[-1][1][-1].replace(" ", "")
