"""The student on real-shaped streams: does it choose what the Bayesian agent would?

    .venv/bin/python benchmarks/student_real.py --models shipped=agent/lab/models/student-q8_0.gguf \\
        new=runs/x/export/student-q8_0.gguf --json runs/x/real.json --md runs/x/real.md

Streams (built in throw-away homes through the product's own path: import or the storage
writer, ``rhythm map``):

- the sample people: Apple Health + calendar, WHOOP + calendar (``rhythm/data/sample``);
- generated histories: the busy week of ``lab/people/busy_week.py``, the watch-and-calendar
  person of ``lab/people/watch_calendar.py`` (whole, and with missing days and a calendar pause),
  and seeded people of this script (bed and wake times, nights, HRV, steps, workouts and a
  calendar drawn per person, days without the watch).

Decisions: every morning, afternoon and evening of the last ``--days`` days of each stream
at which ``rhythm recommend`` asks the local model (the slot is open: not fixed by
commitments; the night is a bedtime and never asked). For each:

- **teacher**: the Bayesian agent fed what ``rhythm recommend`` feeds its belief (this week
  and the two before it, unobserved meters masked, rewards NaN where unobserved), planning
  the rest of the week afresh (``training.realshape.StreamTeacher``, the teacher of the
  student's product-shaped training weeks);
- **planner**: the day planner's choice for the slot before the model is asked;
- **each model**: its raw pick through ``rhythm.recommend.make_plan`` (the product's prompt
  for the model's format: v4 the whole week, v1 the week after its last gap).

Reported: agreement with the teacher (and with the planner), per stream and overall, and the
action histograms (the goal: agreement >= 0.8 and no action chosen more often than the
teacher chooses it). ``--teacher-seeds K`` (default 4) runs the teacher with K seeds per
decision: how often it agrees with itself under other posterior draws, and each model's
agreement with the seeds' majority (the training weeks' labels come from every week's own
seed, so the majority is what a student can learn; seed 0 is one draw of it), each seed's
action histogram, and the actions a model chooses more often than any seed does.
Each model's agreement comes with its count and a 95% (Wilson) interval, and every model
after the first with a paired count against the first (decisions where exactly one of the
two agrees with the teacher, and the exact sign test's p): on 299 decisions the interval is
about +-0.045, so two models a few decisions apart are not told apart.
``--rerender report.json`` recomputes the tables from a saved report's decisions;
``--join later.json`` with it adds the models of a later run on the same decisions (paired
with the first report's; the teacher's picks must match, so ``--teacher-seeds 1`` suffices
for the later run).
``--unseen N`` adds N people of the generator behind the stream training weeks
(``lab.streams``, ``rhythm train streams``) on seeds no training run uses, reported apart:
the streams above are held out from training by kind (the student's stream weeks come from
another generator), these only by seed. ``--sim-weeks N`` adds simulated product-shaped weeks
(``training.realshape.product_week`` on evaluation seeds): agreement with the teacher's
label at every free step, v4 models only.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time as _time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from datetime import UTC, date, datetime, time, timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402
from zoneinfo import ZoneInfo  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from common.records import ACTIONS, SLOTS, Event, Sample, SleepSession, Workout  # noqa: E402

SLOT_TIMES = {0: time(8, 30), 1: time(13, 30), 2: time(19, 0)}  # when recommend is run


@dataclass
class Stream:
    name: str
    settings: Any
    last: date  # the last day with data: decisions on the days up to it


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- streams -----------------------------------------------------------------------------------


def _write(settings, records) -> None:
    from storage import open_db
    from storage.writer import write_records

    with open_db(settings.database) as db:
        write_records(db, list(records))


def sample_streams(root: Path) -> Iterator[Stream]:
    from lab.streams import throwaway_home
    from rhythm import jobs
    from rhythm.data.make_sample import SAMPLE_TIMEZONE, SAMPLE_TODAY
    from rhythm.demo import SAMPLE_DIR

    for name, source, file in (
        ("sample-healthkit", "healthkit", "apple_health_export.zip"),
        ("sample-whoop", "whoop", "whoop_export.zip"),
    ):
        s = throwaway_home(root, name, SAMPLE_TIMEZONE)
        jobs.import_file(s, source, SAMPLE_DIR / file)
        jobs.import_file(s, "ics", SAMPLE_DIR / "calendar.ics")
        jobs.map_data(s, now=datetime.combine(SAMPLE_TODAY, time(23), ZoneInfo(SAMPLE_TIMEZONE)))
        yield Stream(name, s, SAMPLE_TODAY)


def test_streams(root: Path) -> Iterator[Stream]:
    from lab.people import busy_week
    from lab.people import watch_calendar as people
    from lab.streams import Person, person_settings, throwaway_home
    from rhythm import jobs

    s = throwaway_home(root, "busy-week", "Europe/Berlin")
    _write(s, busy_week.wearable_records())
    jobs.import_file(s, "ics", busy_week.write_ics(root / "busy-week"))
    jobs.map_data(s, now=datetime.combine(busy_week.WEDNESDAY, time(23), busy_week.TZ))
    yield Stream("busy-week", s, busy_week.WEDNESDAY)

    last = people.START + timedelta(days=41)
    skip = frozenset(people.START + timedelta(days=d) for d in (30, 31, 36))
    pause = (people.START + timedelta(days=33), people.START + timedelta(days=38))
    for name, watch, cal in (
        ("people-watch", people.watch_records(42), people.calendar_records(42)),
        ("people-gaps", people.watch_records(42, skip), people.calendar_records(42, pause)),
    ):
        person = Person(name, people.ZONE.key, last, [*watch, *cal])
        yield Stream(name, person_settings(person, root), last)


TITLES_WORK = ("Team standup", "Sprint planning", "1:1 with Alex", "Focus time", "Quarterly review",
               "Design review", "Client call", "Lecture: statistics", "Write report")
TITLES_FREE = ("Dinner with friends", "Gym", "Yoga class", "Call with mom", "Movie night", "Choir",
               "Family lunch", "Dentist", "Reading club", "Run with Sam")


def generated_people(rng: np.random.Generator, n: int, days: int = 35) -> Iterator[tuple[str, date, list[Any], str]]:
    """``n`` seeded people: (name, last day, records, zone)."""
    zone = "Europe/Amsterdam"
    tz = ZoneInfo(zone)
    for k in range(n):
        last = date(2025, 6, 1) + timedelta(days=int(rng.integers(0, 60)))
        first = last - timedelta(days=days - 1)
        bed = rng.normal(23.0, 0.8)
        sleep_h = rng.normal(7.2, 0.5)
        hrv0, rhr0 = rng.normal(50, 12), rng.normal(58, 5)
        p_off = rng.uniform(0.0, 0.25)  # days without the watch
        meetings = rng.uniform(0.5, 3.0)
        evenings = rng.uniform(0.1, 0.5)
        recs: list[Any] = []
        for i in range(days):
            d = first + timedelta(days=i)
            base = datetime.combine(d, time(0), tz)
            if rng.random() >= p_off:
                start = base + timedelta(hours=bed + rng.normal(0, 0.5) - 24)
                asleep = max(4.0, sleep_h + rng.normal(0, 0.8)) * 60
                end = start + timedelta(minutes=asleep + 25)
                off = int(end.utcoffset().total_seconds() // 60)
                recs.append(SleepSession("whoop", f"g{k}s{i}", start, end, d, sleep_min=asleep,
                                         in_bed_min=asleep + 25, tz_offset_min=off))
                wake = end + timedelta(minutes=20)
                recs.append(Sample("whoop", "hrv_rmssd", wake, wake, max(15.0, hrv0 + rng.normal(0, 8)), "ms", d,
                                   tz_offset_min=off))
                recs.append(Sample("whoop", "resting_heart_rate", wake, wake, rhr0 + rng.normal(0, 3), "bpm", d,
                                   tz_offset_min=off))
                for h in range(8, 22):
                    if rng.random() < 0.85:
                        t0 = base + timedelta(hours=h)
                        recs.append(Sample("apple", "steps", t0, t0 + timedelta(hours=1),
                                           float(max(0, rng.normal(450, 300))), "count", d, "watch",
                                           tz_offset_min=off))
                if rng.random() < 0.3:
                    h = float(rng.choice([7.0, 12.5, 18.0]))
                    recs.append(Workout("whoop", f"g{k}w{i}", base + timedelta(hours=h),
                                        base + timedelta(hours=h + 0.75), d, "running", duration_min=45,
                                        tz_offset_min=off))
            if d.weekday() < 5:
                for j in range(int(rng.poisson(meetings))):
                    h0 = float(rng.choice([9.0, 10.0, 11.0, 13.0, 14.0, 15.0, 16.0]))
                    dur = float(rng.choice([0.5, 1.0, 2.0, 3.0]))
                    recs.append(Event("calendar", "primary", f"g{k}e{i}-{j}", base + timedelta(hours=h0),
                                      base + timedelta(hours=h0 + dur), False, d,
                                      title=str(rng.choice(TITLES_WORK)), timezone=zone))
            if rng.random() < evenings:
                h0 = float(rng.choice([18.0, 19.0, 19.5]))
                recs.append(Event("calendar", "primary", f"g{k}v{i}", base + timedelta(hours=h0),
                                  base + timedelta(hours=h0 + 2.5), False, d,
                                  title=str(rng.choice(TITLES_FREE)), timezone=zone))
        yield f"generated-{k}", last, recs, zone


def generated_streams(root: Path, n: int, seed: int = 7) -> Iterator[Stream]:
    from lab.streams import Person, person_settings

    for name, last, recs, zone in generated_people(np.random.default_rng(seed), n):
        yield Stream(name, person_settings(Person(name, zone, last, recs), root), last)


#: Seeds of the unseen people of ``lab.streams`` (training uses 1,000,000 on).
UNSEEN_SEED = 90_000_000
UNSEEN = "unseen people (training generator)"


def unseen_streams(root: Path, n: int) -> Iterator[Stream]:
    """``n`` people of the stream weeks' generator (``lab.streams.synthetic_person``) on
    seeds no training run uses: how the student does on new people like those it was
    trained on, beside the streams above, which it never saw the like of."""
    from lab.streams import person_settings, synthetic_person

    for k in range(n):
        person = synthetic_person(UNSEEN_SEED + k)
        yield Stream(f"unseen-{k}", person_settings(person, root), person.last)


# --- decisions ---------------------------------------------------------------------------------


def teacher_picks(db, settings, day: date, slot: int, seeds: list[int]) -> list[str]:
    """The Bayesian agent as ``rhythm recommend`` would feed it, planning afresh: its pick
    with each of ``seeds`` (the seed fixes the posterior draws the plan is scored on; the
    training weeks' teachers use each week's own seed)."""
    from rhythm.derive import observation_records
    from rhythm.recommend import HISTORY_WEEKS, REAL_NOISE_SD
    from rhythm.settings import user_zone
    from training.realshape import StreamTeacher, teacher_view

    week_start = day - timedelta(days=day.weekday())
    records = [
        (o, i)
        for o, i in observation_records(db, week_start - timedelta(weeks=HISTORY_WEEKS), day, tz=user_zone(settings))
        if (date.fromisoformat(i["local_day"]), SLOTS.index(i["slot_name"])) <= (day, slot)
    ]
    out = []
    for seed in seeds:
        teacher = StreamTeacher(REAL_NOISE_SD)
        teacher.reset(seed)
        for o, i in records:
            teacher.observe(teacher_view(o, i), week=date.fromisoformat(i["local_day"]) >= week_start)
        current = records[-1][0]
        a, _ = teacher.decide(current["meters"], int(current["t"]))
        out.append(ACTIONS[a])
    return out


def modal(picks: list[str]) -> str:
    """The most frequent pick (ties: the first seen)."""
    counts = Counter(picks)
    return max(picks, key=lambda p: (counts[p], -picks.index(p)))


def stream_decisions(stream: Stream, days: int, models: dict[str, Path], teacher_seeds: int = 1) -> list[dict[str, Any]]:
    from rhythm.recommend import make_plan
    from rhythm.settings import user_zone
    from storage import open_db

    tz = user_zone(stream.settings)
    out = []
    with open_db(stream.settings.database) as db:
        for k in range(days - 1, -1, -1):
            day = stream.last - timedelta(days=k)
            for slot, at in SLOT_TIMES.items():
                now = datetime.combine(day, at, tz)
                row: dict[str, Any] = {"stream": stream.name, "day": day.isoformat(), "slot": SLOTS[slot]}
                asked = True
                for name, path in models.items():
                    s = replace(stream.settings, agent_backend="llm", model_path=path)
                    plan = make_plan(db, s, day, now.astimezone(UTC))
                    if not plan.picks:
                        asked = False
                        break
                    row["planner"] = plan.picks["planner"]
                    row[name] = plan.picks["model"]
                if not asked or not models:
                    continue
                picks = teacher_picks(db, stream.settings, day, slot, list(range(teacher_seeds)))
                row["teacher"] = picks[0]
                if teacher_seeds > 1:
                    row["teacher_seeds"] = picks
                out.append(row)
    return out


# --- simulated product-shaped weeks ------------------------------------------------------------


def sim_decisions(weeks: int, models: dict[str, Path], seed0: int = 20_000_000) -> list[dict[str, Any]]:
    from agent.prompting import OUTPUT_GBNF, WEEK_FORMATS, parse_output
    from agent.runtime import LlamaCppModel
    from training.realshape import draw_shape, product_week
    from training.weeks import week_prompt

    loaded = {n: LlamaCppModel(p, n_ctx=2048, n_threads=1) for n, p in models.items()}
    v4 = {n: m for n, m in loaded.items() if m.prompt_format in WEEK_FORMATS}
    rng = np.random.default_rng(seed0)
    out = []
    for w in range(weeks):
        shape = draw_shape(rng, product_share=1.0)
        rec = product_week(seed0 + w, "in-dist", shape)
        for k, ans in enumerate(rec["answers"]):
            if ans is None:
                continue
            row = {"stream": "sim-product", "week": w, "t": shape.start + k, "teacher": ACTIONS[ans["action"]]}
            for name, m in v4.items():
                prompt, _ = week_prompt(rec, k, m.prompt_format)
                p = parse_output(m.complete(prompt, grammar=OUTPUT_GBNF, max_tokens=24))
                row[name] = p.action if p.valid else None
            out.append(row)
        _progress(f"sim-product: week {w + 1}/{weeks}")
    for m in loaded.values():
        m.close()
    return out


# --- report ------------------------------------------------------------------------------------


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a share of ``k`` in ``n`` (agreement on a few hundred
    decisions moves by a few hundredths from one model to the next by chance alone)."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (mid - half, mid + half)


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test (McNemar's exact test on the discordant decisions): the
    chance of a split at least this uneven if either model were as likely to be the one
    that agrees with the teacher."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def overchosen_tests(picks: list[str | None], teacher: list[str]) -> dict[str, dict[str, float]]:
    """For each action a model chooses more often than the teacher (seed 0): the decisions
    where only the model chooses it against those where only the teacher does, and the
    one-sided exact test's p (McNemar on that action: the chance of a split at least this
    uneven if the model were as likely to swap it in as out)."""
    out = {}
    for a in ACTIONS:
        only_model = sum(p == a and t != a for p, t in zip(picks, teacher, strict=True))
        only_teacher = sum(t == a and p != a for p, t in zip(picks, teacher, strict=True))
        if only_model > only_teacher:
            n = only_model + only_teacher
            p = sum(math.comb(n, i) for i in range(only_model, n + 1)) / 2**n
            out[a] = {"only_model": only_model, "only_teacher": only_teacher, "p": p}
    return out


def summarize(rows: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    teacher = Counter(r["teacher"] for r in rows)
    out: dict[str, Any] = {"decisions": len(rows), "histogram": {"teacher": dict(teacher)}}
    refs = ["teacher"] + (["planner"] if any("planner" in r for r in rows) else [])
    if "planner" in refs:
        out["histogram"]["planner"] = dict(Counter(r["planner"] for r in rows))
        out["planner_agrees_with_teacher"] = float(np.mean([r["planner"] == r["teacher"] for r in rows]))
    seeded = [r for r in rows if "teacher_seeds" in r]
    if seeded:
        # how sharp the label is: the same teacher with other posterior draws, and the
        # majority of the other seeds (what a student of many seeds' labels can best learn)
        out["teacher_seeds"] = k = len(seeded[0]["teacher_seeds"])
        # the teacher under its other seeds: how often it chooses each action is itself a
        # range, so "no action chosen more often than the teacher chooses it" is read
        # against the most any seed chooses it (seed 0 alone is one draw)
        out["teacher_seed_agrees"] = {}
        for j in range(1, k):
            out["histogram"][f"teacher seed {j}"] = dict(Counter(r["teacher_seeds"][j] for r in seeded))
            out["teacher_seed_agrees"][f"teacher seed {j}"] = float(
                np.mean([r["teacher_seeds"][j] == r["teacher"] for r in seeded]))
        # every seed holds the same decisions, so the mean over seeds is the mean over picks
        out["teacher_seed_agreement"] = float(np.mean(list(out["teacher_seed_agrees"].values())))
        # the per-action over-choice test of the teacher against itself: what a model's
        # over-choice is measured against (a reseeded teacher swaps some actions in too)
        out["teacher_seed_overchosen"] = {
            f"teacher seed {j}": overchosen_tests([r["teacher_seeds"][j] for r in seeded],
                                                  [r["teacher"] for r in seeded])
            for j in range(1, k)
        }
        out["modal_teacher_agreement"] = float(np.mean([modal(r["teacher_seeds"][1:]) == r["teacher"] for r in seeded]))
        seed_max = {a: max(sum(r["teacher_seeds"][j] == a for r in seeded) for j in range(k)) for a in ACTIONS}
        # the teacher as one deterministic chooser: the seeds' majority at every decision
        # (a greedy student is compared with the teacher's most likely pick, not one draw)
        modes = [modal(r["teacher_seeds"]) for r in seeded]
        majority = Counter(modes)
        out["histogram"]["teacher majority"] = dict(majority)
        out["majority_agrees_with_teacher"] = float(np.mean([m == r["teacher"] for m, r in zip(modes, seeded, strict=True)]))
    first = [r.get(names[0]) == r["teacher"] for r in rows] if names else []
    for n in names:
        picks = [r.get(n) for r in rows]
        if not any(p is not None for p in picks):
            continue
        h = Counter(p for p in picks if p is not None)
        out["histogram"][n] = dict(h)
        out[n] = {
            f"agrees_with_{ref}": float(np.mean([r.get(n) == r[ref] for r in rows])) for ref in refs
        }
        agree = [r.get(n) == r["teacher"] for r in rows]
        out[n]["agrees_count"] = int(sum(agree))
        out[n]["agrees_interval"] = wilson(int(sum(agree)), len(rows))
        if n != names[0] and names[0] in out:
            # paired against the first model: the decisions where exactly one of the two
            # agrees with the teacher
            wins = sum(a and not b for a, b in zip(agree, first, strict=True))
            losses = sum(b and not a for a, b in zip(agree, first, strict=True))
            out[n]["vs_first"] = {"model": names[0], "wins": wins, "losses": losses,
                                  "p": sign_test(wins, losses)}
        over = {a: (h.get(a, 0) - teacher.get(a, 0)) / max(1, len(rows)) for a in ACTIONS}
        out[n]["overchosen_tests"] = overchosen_tests(picks, [r["teacher"] for r in rows])
        worst = max(over, key=lambda a: over[a])
        out[n]["most_overchosen"] = {"action": worst, "excess_share": over[worst]}
        out[n]["invalid"] = sum(p is None for p in picks)
        if seeded:
            out[n]["agrees_with_teacher_mode"] = float(np.mean([r.get(n) == m for m, r in zip(modes, seeded, strict=True)]))
            out[n]["agrees_with_some_seed"] = float(np.mean([r.get(n) in r["teacher_seeds"] for r in seeded]))
            hs = Counter(r.get(n) for r in seeded)
            out[n]["over_teacher_seeds"] = {a: hs[a] - seed_max[a] for a in ACTIONS if hs[a] > seed_max[a]}
            out[n]["over_teacher_majority"] = {a: hs[a] - majority[a] for a in ACTIONS if hs[a] > majority[a]}
    return out


def markdown(report: dict[str, Any], names: list[str]) -> str:
    lines = [
        "| stream | decisions | " + " | ".join(f"{n} vs teacher" for n in names)
        + " | " + " | ".join(f"{n} vs planner" for n in names) + " | planner vs teacher |",
        "|---|---|" + "---|" * (2 * len(names) + 1),
    ]
    for stream, s in report["streams"].items():
        cells = [f"{s[n]['agrees_with_teacher']:.2f}" if n in s else "-" for n in names]
        cells += [f"{s[n].get('agrees_with_planner', math.nan):.2f}" if n in s else "-" for n in names]
        pvt = s.get("planner_agrees_with_teacher")
        lines.append(f"| {stream} | {s['decisions']} | " + " | ".join(cells)
                     + f" | {'-' if pvt is None else f'{pvt:.2f}'} |")
    for group in ("real-shaped (all)", UNSEEN, "sim-product"):
        if group not in report:
            continue
        s = report[group]
        lines += ["", f"**{group}**: {s['decisions']} decisions", "",
                  "| who | " + " | ".join(a for a in ACTIONS) + " | agreement with the teacher |",
                  "|---|" + "---|" * (len(ACTIONS) + 1)]
        for who, h in s["histogram"].items():
            if who == "teacher":
                agree = "1.00"
            elif who == "planner":
                agree = f"{s['planner_agrees_with_teacher']:.2f}"
            elif who.startswith("teacher seed "):
                agree = f"{s['teacher_seed_agrees'][who]:.2f}"
            elif who == "teacher majority":
                agree = f"{s['majority_agrees_with_teacher']:.2f}"
            else:
                agree = f"{s[who]['agrees_with_teacher']:.2f}"
            lines.append(f"| {who} | " + " | ".join(str(h.get(a, 0)) for a in ACTIONS) + f" | {agree} |")
        if "teacher_seed_agreement" in s:
            k = s["teacher_seeds"]
            lines += ["", f"How sharp the label is ({k} teacher seeds: the seed fixes the posterior draws "
                      "its plans are scored on): the teacher agrees with itself under another seed in "
                      f"{s['teacher_seed_agreement']:.2f} of decisions; the majority of the other seeds "
                      f"agrees with seed 0 in {s['modal_teacher_agreement']:.2f}.", "",
                      "| model | vs teacher (seed 0) | decisions (95% interval) | vs the seeds' majority"
                      " | one of the seeds' picks |",
                      "|---|---|---|---|---|"]
            for n in names:
                if n in s:
                    lo, hi = s[n]["agrees_interval"]
                    lines.append(f"| {n} | {s[n]['agrees_with_teacher']:.2f} | {s[n]['agrees_count']} of"
                                 f" {s['decisions']} ({lo:.2f}-{hi:.2f}) | {s[n]['agrees_with_teacher_mode']:.2f}"
                                 f" | {s[n]['agrees_with_some_seed']:.2f} |")
            paired = [n for n in names if "vs_first" in s.get(n, {})]
            if paired:
                lines += ["", f"Paired against {names[0]} (decisions where exactly one of the two agrees "
                          "with the teacher; p: two-sided exact sign test):", ""]
                for n in paired:
                    v = s[n]["vs_first"]
                    lines.append(f"- {n}: {v['wins']} won, {v['losses']} lost, p = {v['p']:.2f}")
            lines += ["", "Chosen more often than any teacher seed chooses it (by how many decisions):", ""]
            for n in names:
                if n in s:
                    over = s[n]["over_teacher_seeds"]
                    lines.append(f"- {n}: " + (", ".join(f"{a} +{d}" for a, d in over.items()) or "none"))
            lines += ["", "Chosen more often than the teacher's majority (the seeds' most frequent pick at "
                      "each decision, the teacher as one deterministic chooser):", ""]
            for n in names:
                if n in s and "over_teacher_majority" in s[n]:
                    over = s[n]["over_teacher_majority"]
                    lines.append(f"- {n}: " + (", ".join(f"{a} +{d}" for a, d in over.items()) or "none"))
        tested = [(n, s[n]["overchosen_tests"]) for n in names if "overchosen_tests" in s.get(n, {})]
        tested += list(s.get("teacher_seed_overchosen", {}).items())
        if tested:
            lines += ["", "Chosen more often than the teacher (seed 0), per action: decisions where only the "
                      "model picks it / only the teacher does, one-sided exact test (p < 0.05 in bold; "
                      "the teacher's other seeds are held to the same test):", ""]
            for n, t in tested:
                cells = [(f"**{a} {v['only_model']}/{v['only_teacher']} (p {v['p']:.3f})**" if v["p"] < 0.05
                          else f"{a} {v['only_model']}/{v['only_teacher']} (p {v['p']:.2f})") for a, v in t.items()]
                lines.append(f"- {n}: " + (", ".join(cells) or "none"))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=[f"shipped={ROOT / 'agent/lab/models/student-q8_0.gguf'}"],
                    help="models as name=path.gguf")
    ap.add_argument("--days", type=int, default=14, help="days per stream (the last ones)")
    ap.add_argument("--generated", type=int, default=4, help="seeded generated people")
    ap.add_argument("--unseen", type=int, default=0,
                    help="people of the stream weeks' generator on unseen seeds (reported apart)")
    ap.add_argument("--sim-weeks", type=int, default=0, help="simulated product-shaped weeks (v4 models)")
    ap.add_argument("--streams", nargs="*", default=None, help="only these streams (names)")
    ap.add_argument("--teacher-seeds", type=int, default=4,
                    help="run the teacher with this many seeds per decision (how sharp its label is)")
    ap.add_argument("--rerender", default="", metavar="JSON",
                    help="recompute the summaries and tables from the decisions of a saved report")
    ap.add_argument("--join", nargs="+", default=None, metavar="JSON",
                    help="with --rerender: add the models of these reports, run on the same decisions")
    ap.add_argument("--json", default="", help="write the report here")
    ap.add_argument("--md", default="", help="write the markdown tables here")
    args = ap.parse_args()
    if args.join and not args.rerender:
        ap.error("--join needs --rerender (the report the others join)")
    if args.rerender:
        report = json.loads(Path(args.rerender).read_text())
        for other in args.join or []:
            report = join(report, json.loads(Path(other).read_text()))
        report = rerender(report)
        _emit(report, list(report["models"]), args)
        return
    models = {n: Path(p) for n, p in (m.split("=", 1) for m in args.models)}
    names = list(models)
    t0 = _time.time()
    rows: list[dict[str, Any]] = []
    report: dict[str, Any] = {"models": {n: str(p) for n, p in models.items()}, "days": args.days, "streams": {}}
    with tempfile.TemporaryDirectory(prefix="student-real-") as tmp:
        root = Path(tmp)
        builders = [sample_streams(root), test_streams(root), generated_streams(root, args.generated)]
        for builder in builders:
            for stream in builder:
                if args.streams and stream.name not in args.streams:
                    continue
                got = stream_decisions(stream, args.days, models, args.teacher_seeds)
                rows += got
                report["streams"][stream.name] = summarize(got, names)
                _progress(f"{stream.name}: {len(got)} decisions ({_time.time() - t0:.0f} s)")
        unseen: list[dict[str, Any]] = []
        for stream in unseen_streams(root, args.unseen):
            got = stream_decisions(stream, args.days, models, args.teacher_seeds)
            unseen += got
            report["streams"][stream.name] = summarize(got, names)
            _progress(f"{stream.name}: {len(got)} decisions ({_time.time() - t0:.0f} s)")
    report["real-shaped (all)"] = summarize(rows, names)
    if unseen:
        report[UNSEEN] = summarize(unseen, names)
        report["unseen_rows"] = unseen
    if args.sim_weeks:
        sim = sim_decisions(args.sim_weeks, models)
        report["sim-product"] = summarize(sim, names)
        report["sim_rows"] = sim
    report["rows"] = rows
    report["seconds"] = round(_time.time() - t0, 1)
    _emit(report, names, args)


_ROW_LISTS = ("rows", "unseen_rows", "sim_rows")


def join(report: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``report`` with the models of ``other``, a report on the same decisions (each model is
    deterministic, so a model run later on the same streams and seeds is paired with the
    earlier ones): every decision must be in both, with the same teacher pick (seed 0).
    ValueError otherwise."""
    new = [n for n in other["models"] if n not in report["models"]]
    if not new:
        raise ValueError("the joined report has no model the first does not")
    out = json.loads(json.dumps(report))
    for key in _ROW_LISTS:
        mine, theirs = out.get(key, []), other.get(key, [])
        if not mine and not theirs:
            continue

        def ident(r: dict[str, Any]) -> tuple:
            return (r["stream"], r.get("day", r.get("week")), r.get("slot", r.get("t")))

        by = {ident(r): r for r in theirs}
        if len(by) != len(mine) or any(ident(r) not in by for r in mine):
            raise ValueError(f"the reports' {key} are not the same decisions")
        for r in mine:
            o = by[ident(r)]
            if o["teacher"] != r["teacher"]:
                raise ValueError(f"the teacher differs at {ident(r)}: not the same decisions")
            for n in new:
                r[n] = o.get(n)
    out["models"] = {**report["models"], **{n: other["models"][n] for n in new}}
    return out


def rerender(report: dict[str, Any]) -> dict[str, Any]:
    """The summaries of a saved report recomputed from its decisions (after this script's
    summaries change, without running the models and the teacher again)."""
    names = list(report["models"])
    rows, unseen = report["rows"], report.get("unseen_rows", [])
    for stream in report["streams"]:
        report["streams"][stream] = summarize([r for r in rows + unseen if r["stream"] == stream], names)
    report["real-shaped (all)"] = summarize(rows, names)
    if unseen:
        report[UNSEEN] = summarize(unseen, names)
    if "sim_rows" in report:
        report["sim-product"] = summarize(report["sim_rows"], names)
    return report


def _emit(report: dict[str, Any], names: list[str], args: argparse.Namespace) -> None:
    md = markdown(report, names)
    print(md)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    if args.md:
        Path(args.md).write_text(md)


if __name__ == "__main__":
    main()
