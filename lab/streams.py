"""Stream weeks: the student's training weeks made through the product's own path.

The simulated product weeks (``training.realshape``) imitate what ``rhythm recommend``
shows the student; these weeks *are* it. A synthetic person's wearable and calendar records
(:func:`synthetic_person`: a device, a chronotype, nights, HRV, steps, workouts, stress,
meditation, tasks, a calendar, days without the watch, all drawn per person) go through the
storage writer and ``rhythm map`` in a throw-away home; each week is then read back as
``rhythm recommend`` reads it:

- the views: ``rhythm.derive.observation_records`` as the v4 prompt shows them
  (``agent.prompting.observed_view``), Monday on;
- the ``cal`` lines: the week's calendar frames (``rhythm.recommend.fixed_lines``);
- the ``b`` lines: ``rhythm.recommend.person_filters`` (this week and the two before it);
- the targets: the Bayesian agent as ``benchmarks/student_real.py`` runs it
  (``training.realshape.StreamTeacher``: every masked observation since two weeks before
  the Monday, the rest of the week planned afresh) at every slot ``rhythm recommend`` asks
  the model about (morning, afternoon and evening not held by a commitment).

One JSON line per week in the ``rhythm-rollouts/2`` layout, so ``training.dataset`` reads
them beside the simulated weeks. ``rhythm train streams`` writes them.
"""

from __future__ import annotations

import json
import tempfile
import time as _time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from datetime import time as clock
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

from common.records import ACTIONS, SLOTS, Event, Sample, SleepSession, Workout

#: Seeds of generated people: the stream of draws behind one person ("STR").
PERSON_STREAM = 0x535452
ZONES = ("Europe/Amsterdam", "Europe/London", "America/New_York", "America/Los_Angeles", "Asia/Tokyo",
         "Australia/Sydney", "America/Sao_Paulo", "Asia/Kolkata")
#: Calendar titles by what the person is doing (the mapping classifies them; the model
#: never sees a title, only the class of the slot it fixes).
TITLES = {
    "work": ("Team standup", "Sprint planning", "1:1 with Alex", "Quarterly review", "Design review",
             "Client call", "All hands", "Interview", "Budget meeting", "Sync with legal"),
    "focus": ("Focus time", "Write report", "Deep work", "Coding block", "Thesis writing", "Analysis"),
    "learn": ("Lecture: statistics", "Spanish class", "Online course", "Reading club", "Workshop"),
    "social": ("Dinner with friends", "Drinks", "Birthday party", "Board games night", "Coffee with Kim",
               "Choir", "Book club"),
    "family": ("Call with mom", "Family lunch", "Kids' football", "Visit grandparents", "Date night"),
    "exercise": ("Gym", "Yoga class", "Run with Sam", "Swimming", "Climbing"),
    "rest": ("Massage", "Meditation", "Spa afternoon"),
    "chores": ("Dentist", "Groceries", "Car service", "Haircut", "Tax return"),
    "screen": ("Movie night", "Series marathon", "Match on TV"),
}
SPORTS = ("running", "cycling", "yoga", "strength_training", "walking", "swimming", "hiit")


@dataclass(frozen=True)
class Person:
    name: str
    zone: str
    last: date  # the last day with records
    records: list[Any]


def synthetic_person(seed: int, days: int | None = None) -> Person:
    """A person's records, drawn from ``seed``: which device they wear (WHOOP-like: sleep,
    HRV, resting HR, recovery; Garmin-like: also steps, stress and body battery; Apple
    Watch-like: steps, SDNN and mindful minutes), how they sleep (bedtime, length, weekend
    lie-in), how they recover (HRV level, a hard stretch now and then), how they move,
    exercise, meditate and tick off tasks, how full their calendar is and with what, and
    how often the watch stays on the charger. Some people keep a routine: little day-to-day
    jitter and the same calendar every week (standups, a weekly dinner), the way a real
    recurring calendar looks; half of those with a job have the same workday every weekday."""
    rng = np.random.default_rng([int(seed), PERSON_STREAM])
    zone = str(rng.choice(ZONES))
    tz = ZoneInfo(zone)
    days = int(days or rng.integers(14, 43))
    last = date(2025, 1, 6) + timedelta(days=int(rng.integers(0, 300)))
    first = last - timedelta(days=days - 1)
    device = str(rng.choice(["whoop", "garmin", "apple"], p=[0.35, 0.35, 0.3]))
    src = {"whoop": "whoop", "garmin": "garmin", "apple": "healthkit"}[device]
    bed = rng.normal(23.2, 0.9)
    weekend_shift = rng.uniform(0.0, 1.5)
    sleep_h = float(np.clip(rng.normal(7.1, 0.6), 5.0, 9.0))
    sleep_sd = rng.uniform(0.3, 1.1)
    hrv0, rhr0 = float(np.clip(rng.normal(50, 14), 18, 110)), float(np.clip(rng.normal(58, 6), 42, 80))
    steps_mean = rng.uniform(150, 900)
    active_from, active_to = int(rng.integers(6, 10)), int(rng.integers(19, 24))
    p_workout = rng.uniform(0.0, 0.6)
    workout_hour = float(rng.choice([6.5, 7.0, 12.0, 17.5, 18.5, 20.0]))
    p_mindful = rng.uniform(0.0, 0.5) if device == "apple" else 0.0
    stress0 = rng.uniform(20, 45)
    p_off = rng.choice([0.0, 0.05, 0.15, 0.3, 0.4])  # days the watch stays off
    off_run = rng.uniform(1.0, 6.0)
    p_tasks = rng.uniform(0.0, 1.0) if rng.random() < 0.3 else 0.0
    workday = rng.random() < 0.85  # has a weekday job with meetings
    meetings = rng.uniform(0.3, 4.0) if workday else rng.uniform(0.0, 0.8)
    focus = rng.uniform(0.0, 0.8)
    evening_rate = rng.uniform(0.05, 0.6)
    weekend_rate = rng.uniform(0.1, 0.9)
    tastes = rng.dirichlet(np.ones(len(TITLES)) * 0.7)
    kinds = list(TITLES)
    has_calendar = rng.random() < 0.9
    cal_pause = None
    if has_calendar and rng.random() < 0.35:  # a holiday: no meetings for days to two weeks
        s0 = int(rng.integers(0, max(1, days - 5)))
        cal_pause = (first + timedelta(days=s0), first + timedelta(days=s0 + int(rng.integers(3, 15))))
    hard = set()
    if rng.random() < 0.5:  # a hard stretch: short nights, low HRV
        s0 = int(rng.integers(0, max(1, days - 3)))
        hard = {first + timedelta(days=s0 + j) for j in range(int(rng.integers(2, 7)))}
    # a routine: the noise of nights, HRV and steps scaled down, and (with a calendar)
    # the same events every week: a template drawn once, each event kept on 90% of weeks
    routine = rng.random() < 0.35
    jitter = rng.uniform(0.15, 0.5) if routine else 1.0
    template: dict[int, list[tuple[float, float, str, int | None]]] = {}
    keep = 0.9  # the share of weeks a template event happens
    if routine and has_calendar:
        for wd in range(7):
            slots: list[tuple[float, float, str, int | None]] = []
            if wd < 5 and workday:
                for _ in range(int(rng.poisson(meetings))):
                    slots.append((float(rng.choice([8.5, 9.0, 10.0, 11.0, 13.0, 14.0, 15.0, 16.0])),
                                  float(rng.choice([0.5, 1.0, 1.0, 2.0])), "work", int(rng.integers(2, 9))))
                if rng.random() < focus:
                    slots.append((float(rng.choice([9.0, 10.0, 14.0])), float(rng.choice([2.0, 3.0])), "focus", None))
            if rng.random() < (weekend_rate if wd >= 5 else evening_rate):
                h0 = float(rng.choice([10.0, 12.0, 15.0, 18.0, 19.0]) if wd >= 5 else rng.choice([18.0, 19.0, 20.0]))
                slots.append((h0, float(rng.choice([1.0, 2.0, 3.0])), str(rng.choice(kinds, p=tastes)),
                              int(rng.integers(2, 7))))
            template[wd] = slots
        # half the routines with a job repeat one workday Monday to Friday (a daily standup,
        # a daily focus block: a recurring series), so the person's own spread of work is
        # near zero and a break or a weekend takes progress to the bottom of the meter, as
        # on a real recurring calendar; drawn from a stream of its own (other people's
        # records are unchanged)
        daily_rng = np.random.default_rng([int(seed), PERSON_STREAM, 1])
        if workday and daily_rng.random() < 0.5:
            daily = [(float(daily_rng.choice([8.5, 9.0, 9.5])), 0.5, "work", int(daily_rng.integers(3, 9)))]
            if daily_rng.random() < 0.7:
                daily.append((float(daily_rng.choice([10.0, 13.0, 14.0])), float(daily_rng.choice([2.0, 3.0])),
                              "focus", None))
            for _ in range(int(daily_rng.integers(0, 3))):
                daily.append((float(daily_rng.choice([11.0, 15.0, 16.0])), float(daily_rng.choice([0.5, 1.0])),
                              "work", int(daily_rng.integers(2, 6))))
            for wd in range(5):
                template[wd] = daily + [e for e in template[wd] if e[2] not in ("work", "focus")]
            keep = 1.0  # a recurring series does not skip days
            if days >= 28 and daily_rng.random() < 0.6:  # a break after weeks of the routine
                s0 = int(daily_rng.integers(21, days - 3))
                cal_pause = (first + timedelta(days=s0), first + timedelta(days=s0 + int(daily_rng.integers(3, 10))))
    recs: list[Any] = []
    off = False
    name = f"p{seed}"

    def title_of(kind: str) -> str:
        return str(rng.choice(TITLES[kind]))

    def event(d: date, k: int, h0: float, dur: float, kind: str, people: int | None = None) -> None:
        base = datetime.combine(d, clock(0), tz)
        recs.append(Event("calendar", "primary", f"{name}e{d.isoformat()}-{k}", base + timedelta(hours=h0),
                          base + timedelta(hours=h0 + dur), False, d, title=title_of(kind),
                          attendees_count=people, timezone=zone))

    for i in range(days):
        d = first + timedelta(days=i)
        base = datetime.combine(d, clock(0), tz)
        weekend = d.weekday() >= 5
        # a run without the watch ends with probability 1 / off_run a day (mean length off_run)
        off = rng.random() >= 1.0 / off_run if off else rng.random() < p_off
        strain = d in hard
        if not off:
            b = bed + (weekend_shift if weekend else 0.0) + rng.normal(0, 0.45 * jitter) + (0.7 if strain else 0.0)
            asleep = max(3.5, sleep_h + rng.normal(0, sleep_sd * jitter) - (1.2 if strain else 0.0)) * 60
            in_bed = asleep + float(rng.uniform(10, 45))
            start = base + timedelta(hours=b - 24)
            end = start + timedelta(minutes=in_bed)
            tzo = int(end.utcoffset().total_seconds() // 60)
            deep = asleep * rng.uniform(0.12, 0.25)
            rem = asleep * rng.uniform(0.15, 0.27)
            recs.append(SleepSession(src, f"{name}s{i}", start, end, end.astimezone(tz).date(), sleep_min=asleep,
                                     in_bed_min=in_bed, awake_min=in_bed - asleep, deep_min=deep, rem_min=rem,
                                     light_min=asleep - deep - rem, efficiency_pct=100 * asleep / in_bed,
                                     tz_offset_min=tzo))
            wake = end + timedelta(minutes=15)
            hrv = max(12.0, hrv0 * (0.75 if strain else 1.0) + rng.normal(0, hrv0 * 0.15 * jitter))
            metric = "hrv_sdnn" if device == "apple" else "hrv_rmssd"
            recs.append(Sample(src, metric, wake, wake, hrv, "ms", d, tz_offset_min=tzo))
            recs.append(Sample(src, "resting_heart_rate", wake, wake, rhr0 + rng.normal(0, 2.5) + (4 if strain else 0),
                               "bpm", d, tz_offset_min=tzo))
            if device == "whoop":
                rec = float(np.clip(50 + (hrv - hrv0) / hrv0 * 120 + rng.normal(0, 10), 1, 99))
                recs.append(Sample(src, "recovery", wake, wake, rec, "pct", d, tz_offset_min=tzo))
            if device != "whoop":
                for h in range(active_from, active_to):
                    if rng.random() < 0.9:
                        t0 = base + timedelta(hours=h)
                        v = float(max(0.0, rng.normal(steps_mean, steps_mean * 0.7 * jitter)))
                        recs.append(Sample(src, "steps", t0, t0 + timedelta(hours=1), v, "count", d, "watch",
                                           tz_offset_min=tzo))
            if device == "garmin":
                for h in range(active_from, active_to, 2):
                    t0 = base + timedelta(hours=h)
                    s = float(np.clip(stress0 + (15 if strain else 0) + rng.normal(0, 10), 0, 100))
                    recs.append(Sample(src, "stress", t0, t0 + timedelta(hours=2), s, "score", d, tz_offset_min=tzo))
                    bb = float(np.clip(90 - 4 * (h - active_from) - (20 if strain else 0) + rng.normal(0, 8), 5, 100))
                    recs.append(Sample(src, "body_battery", t0, t0, bb, "score", d, tz_offset_min=tzo))
            if rng.random() < p_workout:
                h = workout_hour + rng.normal(0, 0.5) + (2.0 if weekend and workout_hour < 9 else 0.0)
                dur = float(rng.choice([25, 40, 60, 90]))
                recs.append(Workout(src, f"{name}w{i}", base + timedelta(hours=h),
                                    base + timedelta(hours=h, minutes=dur), d, str(rng.choice(SPORTS)),
                                    duration_min=dur, tz_offset_min=tzo))
            if rng.random() < p_mindful:
                t0 = base + timedelta(hours=float(rng.choice([7.0, 13.0, 21.5])))
                recs.append(Sample(src, "mindful", t0, t0 + timedelta(minutes=12), 12.0, "min", d,
                                   tz_offset_min=tzo))
        if p_tasks and not weekend:
            for k in range(int(rng.poisson(3 * p_tasks))):
                t0 = base + timedelta(hours=float(rng.uniform(9, 18)))
                tzo = int(t0.utcoffset().total_seconds() // 60)
                recs.append(Sample("todoist", "task_completed", t0, t0, 1.0, "count", d, tz_offset_min=tzo,
                                   detail=f"{name}t{i}-{k}"))
        if not has_calendar or (cal_pause and cal_pause[0] <= d <= cal_pause[1]):
            continue
        k = 0
        if template:
            for h0, dur, kind, people in template[d.weekday()]:
                if rng.random() < keep:
                    event(d, k, h0, dur, kind, people)
                    k += 1
            continue
        if not weekend and workday:
            for _ in range(int(rng.poisson(meetings))):
                h0 = float(rng.choice([8.5, 9.0, 10.0, 11.0, 13.0, 14.0, 15.0, 16.0]))
                event(d, k, h0, float(rng.choice([0.5, 1.0, 1.0, 2.0, 3.0])), "work", int(rng.integers(2, 9)))
                k += 1
            if rng.random() < focus:
                event(d, k, float(rng.choice([9.0, 10.0, 14.0])), float(rng.choice([2.0, 3.0])), "focus")
                k += 1
        if rng.random() < (weekend_rate if weekend else evening_rate):
            kind = str(rng.choice(kinds, p=tastes))
            h0 = float(rng.choice([10.0, 12.0, 15.0, 18.0, 19.0, 19.5]) if weekend else rng.choice([18.0, 19.0, 19.5, 20.0]))
            event(d, k, h0, float(rng.choice([1.0, 1.5, 2.5, 3.0])), kind, int(rng.integers(2, 7)))
    return Person(name, zone, last, recs)


def throwaway_home(root: Path, name: str, zone: str, **overrides: Any):
    """Settings of a fresh home ``root/name`` in ``zone`` (the Bayesian backend), with any
    other settings in ``overrides`` (a loopback server's URLs)."""
    from rhythm.settings import init_home, load_settings

    s = load_settings(home=root / name, env={}, timezone=zone, agent_backend="bayes", **overrides)
    init_home(s)
    return s


def person_settings(person: Person, root: Path):
    """A throw-away home holding ``person``'s records, mapped as ``rhythm map`` maps them."""
    from rhythm import jobs
    from storage import open_db
    from storage.writer import write_records

    s = throwaway_home(root, person.name, person.zone)
    with open_db(s.database) as db:
        write_records(db, list(person.records))
    jobs.map_data(s, now=datetime.combine(person.last, clock(23), ZoneInfo(person.zone)))
    return s


def stream_weeks(db, settings, first: date, last: date, seed: int) -> Iterator[dict[str, Any]]:
    """The weeks (Monday on) holding ``first`` .. ``last`` as training records (module
    docstring); the teacher's posterior draws come from ``seed`` and the week."""
    from agent.prompting import observed_view
    from rhythm.derive import observation_records
    from rhythm.recommend import HISTORY_WEEKS, fixed_lines, person_filters
    from rhythm.refine import week_frames
    from rhythm.settings import user_zone
    from training.realshape import FORMAT, REAL_NOISE_SD, StreamTeacher, teacher_view
    from training.weeks import jsonable

    tz = user_zone(settings)
    monday = first - timedelta(days=first.weekday())
    records = observation_records(db, monday - timedelta(weeks=HISTORY_WEEKS), last, tz=tz)
    k = 0
    while monday <= last:
        end = min(last, monday + timedelta(days=6))
        lo = monday - timedelta(weeks=HISTORY_WEEKS)
        hist = [(o, i) for o, i in records if lo <= date.fromisoformat(i["local_day"]) < monday]
        week = [(o, i) for o, i in records if monday <= date.fromisoformat(i["local_day"]) <= end]
        # each day framed as the planner framed it that day (its sleep habits then)
        frames = [week_frames(db, monday, monday + timedelta(days=j), tz)[-1] for j in range((end - monday).days + 1)]
        fixed = {(f.day, s) for f in frames for s in f.fixed}
        filters = person_filters(hist + week, [], monday)
        wseed = int(seed) * 16 + k
        teacher = StreamTeacher(REAL_NOISE_SD)
        teacher.reset(wseed)
        for o, i in hist:
            teacher.observe(teacher_view(o, i), week=False)
        views, answers = [], []
        for o, i in week:
            teacher.observe(teacher_view(o, i))
            views.append(jsonable(observed_view(o, (i.get("previous") or {}).get("observed")), digits=None))
            d, slot = date.fromisoformat(i["local_day"]), SLOTS.index(i["slot_name"])
            if slot == 3 or (d, slot) in fixed:  # a bedtime or a commitment: never asked
                answers.append(None)
                continue
            a, b = teacher.decide(o["meters"], int(o["t"]))
            answers.append({"action": int(a), "belief": [round(float(x), 4) for x in np.asarray(b).reshape(-1)]})
        if views and any(a is not None for a in answers):
            yield {
                "format": FORMAT,
                "seed": wseed,
                "condition": "stream",
                "teacher": "bayes-stream",
                "shape": {"kind": "stream", "person": settings.home.name, "monday": monday.isoformat()},
                "views": views,
                "context": {"events": fixed_lines(frames), "feedback": [], "observe": "noisy"},
                "answers": answers,
                "filters": [filters[int(v["t"])] for v in views],
                "grade": None,
            }
        monday += timedelta(days=7)
        k += 1


def person_weeks(seed: int) -> list[str]:
    """One generated person's weeks as JSON lines (a worker job)."""
    from storage import open_db

    person = synthetic_person(seed)
    first = min(r.local_day for r in person.records) if person.records else person.last
    with tempfile.TemporaryDirectory(prefix="rhythm-streams-") as tmp:
        s = person_settings(person, Path(tmp))
        with open_db(s.database) as db:
            return [json.dumps(w, separators=(",", ":")) for w in stream_weeks(db, s, first, person.last, seed)]


def _job(seed: int) -> list[str]:
    import os

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    return person_weeks(seed)


def write_streams(out: Path, people: int, seed_start: int, workers: int = 1,
                  progress: Callable[[int, int], None] | None = None,
                  executor: Any = None) -> dict[str, Any]:
    """Generate ``people`` people (seeds ``seed_start`` on), write their weeks to
    ``out/rollouts.jsonl`` (in seed order: the file is the same for any ``workers``, or on a
    Ray cluster: ``executor``, see training/executors.py; one person is one unit, and a run
    stopped half-way continues from the people it wrote)."""
    from training.executors import LocalPool, unit_lines

    out.mkdir(parents=True, exist_ok=True)
    t0 = _time.time()
    seeds = list(range(int(seed_start), int(seed_start) + int(people)))
    weeks = decisions = finished = 0
    hist: dict[int, int] = {}

    def person_done(_lines: int) -> None:
        nonlocal finished
        finished += 1
        if progress:
            progress(finished, len(seeds))

    for line in unit_lines(out / "rollouts.jsonl", _job, seeds, executor or LocalPool(workers), person_done):
        rec = json.loads(line)
        weeks += 1
        for a in rec["answers"]:
            if a is not None:
                decisions += 1
                hist[a["action"]] = hist.get(a["action"], 0) + 1
    summary = {
        "people": len(seeds), "seed_start": int(seed_start), "weeks": weeks, "decisions": decisions,
        "teacher_actions": {ACTIONS[a]: c for a, c in sorted(hist.items())},
        "seconds": round(_time.time() - t0, 1),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
