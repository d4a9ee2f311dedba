"""Planner days: the student's training weeks labelled by the day planner.

The stream weeks (``lab.streams``, ``rhythm train streams``) label each slot with the
Bayesian teacher's week-graded pick; on a real day the day planner (``agent.day``) vets
every pick and replaces the ones its own objective rates clearly worse. These weeks label
each slot with *the day planner's* choice, made the way ``rhythm recommend`` makes it, so a
student trained on them speaks with the planner's voice (issue 37).

For each generated person (``lab.streams.synthetic_person`` and the kinds of
``lab.people.shift_people``: office, rotating shifts, night nurse, parent, student,
retiree; by seed) the records go through the storage writer and ``rhythm map`` in a
throw-away home; then, on each of the person's last ``days`` days, at a drawn time in the
morning, afternoon and evening, the product's own path runs: ``rhythm.day_inputs.load_day``,
``rhythm.belief_filter.run_filter`` (the filter before each slot of the week),
``rhythm.plan_day.plan_day``. Where the slot is one the product asks the model about (an
open block of the current slot: ``rhythm.ask_model.ask_model``), the example is

- the prompt: exactly what the product would give the model there
  (``rhythm.ask_model.model_prompt`` with ``week_fixed`` and the filters, format v4);
- the objective line (``objective``): the planner's objective for each action the slot can
  hold, relative to the best (``agent.day.objective_facts``, ``agent.prompting.objective_line``); the
  prompt of a v6 model is the prompt and this line;
- the answer: the planner's block action for the slot and its belief (the filter's median
  of the three traits), ``ACTION b=S,M,W``.

With ``history`` (the command's default), the days are lived as the product lives them:
each decision's plan is stored as ``rhythm recommend`` stores it (``rhythm.store_plan``: the
next plans see it in their variety and the week's prompt), and after each day the person
answers every block of the day's last plan, accept or ignore, by a hidden rule drawn for
them (``lab.answer_rules``: one of its rules, or none, each with a base acceptance; through
``rhythm feedback``'s ``record_answer``), so later decisions are made, and labelled, with
answers in the prompt and in the planner's objective, as on a real person's second week.

The labels come from whatever planner is on the branch when this runs: re-run it after
the planner changes. One JSON line per decision (``rhythm-planner-days/1``), in seed order
(the file is the same for any number of workers; a stopped run continues from the people
it wrote). ``training.planner_tune`` (which owns the format) fine-tunes the bundled student on them.

With ``model`` set (``evaluate``), each decision also asks that GGUF through the product's
own ask step and records its pick and whether the planner's checks let it stand
(``agent.day.with_model_pick``): the veto rate.

    python -m lab.planner_days --people 200 --workers 2 --out runs/planner-days
    rhythm train planner-days --people 200 --workers 2 --out runs/planner-days
"""

from __future__ import annotations

import json
import tempfile
import time as _time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as clock
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

from common.records import SLOTS
from lab.answer_rules import RULES, answer_plan
from training.common import (
    Progress,
    finish_output,
    help_field,
    log,
    no_progress,
    parse_args,
    prepare_output,
)
from training.planner_tune import FORMAT

#: Draws of the decision times: a stream of its own per person ("PLD").
TIME_STREAM = 0x504C44
#: When in each asked slot ``rhythm recommend`` runs (local hours, drawn uniformly).
ASK_HOURS = {0: (6.0, 11.5), 1: (12.0, 17.0), 2: (18.0, 22.0)}
#: Half the morning asks fall at the daily run (``morning_run_time``, 07:00 by default; the
#: daemon's plan of the day, before the person is up): drawn in these hours instead.
RUN_HOURS, RUN_SHARE = (6.0, 7.5), 0.5
#: Share of people of lab.people.shift_people (the rest: lab.streams.synthetic_person).
SHIFT_SHARE = 0.5
#: With history, the hidden rules people answer by (``lab.answer_rules.RULES`` and None: no
#: answers), drawn per person, and the base acceptances drawn with them.
HISTORY_RULES = (None, *RULES)
BASE_ACCEPT = (0.7, 1.0)


@dataclass
class Args:
    """Planner-labelled decisions from generated people."""

    out: str = help_field("runs/planner-days", "output folder (examples.jsonl, summary.json)")
    people: int = help_field(200, "generated people")
    seed_start: int = help_field(3_000_000, "first person's seed (held-out evaluation uses 90,000,000 on)")
    days: int = help_field(10, "planned days per person (their last days with records)")
    workers: int = help_field(2, "worker processes")
    shift_share: float = help_field(SHIFT_SHARE, "share of people of lab.people.shift_people's kinds")
    run_share: float = help_field(RUN_SHARE, "share of the morning asks at the daily run's hours")
    history: bool = help_field(True, "store each plan and answer each day by a hidden rule (module docstring)")


@dataclass(frozen=True)
class Generated:
    name: str
    kind: str
    zone: str
    records: list[Any]
    days: list[date]  # the days to plan


def generated_person(seed: int, days: int, shift_share: float = SHIFT_SHARE, kind: str | None = None) -> Generated:
    """The person of ``seed``: a shift-people kind (office, rotating, night nurse, parent,
    student, retiree; its own kind by seed) with probability ``shift_share``, else a stream
    person (``kind`` "shift" or "stream" decides instead); their last ``days`` days are
    planned."""
    from lab.people.shift_people import shift_person
    from lab.streams import synthetic_person

    pick = np.random.default_rng([int(seed), TIME_STREAM, 1]).random()
    if kind not in (None, "shift", "stream"):
        raise ValueError(f"kind must be shift or stream, not {kind!r}")
    if kind == "shift" or (kind is None and pick < shift_share):
        p = shift_person(int(seed), plan_days=days)
        return Generated(p.name, p.kind, p.zone, list(p.records), list(p.plan_days))
    s = synthetic_person(int(seed))
    first = min(r.local_day for r in s.records) if s.records else s.last
    n = min(days, (s.last - first).days - 6)  # a week of history before the first planned day
    return Generated(s.name, "stream", s.zone, list(s.records), [s.last - timedelta(days=k) for k in range(n - 1, -1, -1)])


def home_of(person: Generated, root: Path) -> Any:
    """Settings of a throw-away home holding ``person``'s records, mapped as ``rhythm map``
    maps them (the Bayesian backend)."""
    from lab.streams import Person, person_settings

    return person_settings(Person(person.name, person.zone, person.days[-1], person.records), root)


def ask_times(seed: int, days: list[date], tz: Any, run_share: float = RUN_SHARE) -> list[tuple[date, int, datetime]]:
    """(day, slot, local time) of every decision: a drawn time in each asked slot; ``run_share``
    of the mornings at the daily run's hours (``RUN_HOURS``)."""
    rng = np.random.default_rng([int(seed), TIME_STREAM])
    out = []
    for d in days:
        for slot, (lo, hi) in ASK_HOURS.items():
            at_run = rng.random() < run_share
            if slot == 0 and at_run:
                lo, hi = RUN_HOURS
            minutes = int(round(rng.uniform(lo, hi) * 60 / 5) * 5)
            out.append((d, slot, datetime.combine(d, clock(0), tz) + timedelta(minutes=minutes)))
    return out


def decide(db: Any, settings: Any, day: date, now: datetime, model: Path | None = None,
           store: bool = False) -> dict[str, Any] | None:
    """The product's path at ``now``: the prompt the model would get for the current slot
    and the planner's pick there (None: the product asks no model at this time: no open
    block in the slot). With ``model``: its pick and whether the planner let it stand. With
    ``store``: the plan (the model's pick in it where it stood) is stored as ``rhythm
    recommend`` stores it, also when nothing was asked."""
    from agent.day import PLANNER_NAME, objective_facts
    from agent.prompting import FORMAT_V4, format_output, objective_line
    from rhythm.ask_model import ask_model, model_prompt, week_fixed
    from rhythm.belief_filter import run_filter
    from rhythm.day_inputs import load_day
    from rhythm.plan_day import plan_day
    from rhythm.store_plan import store_plan

    data = load_day(db, settings, day, now.astimezone(UTC))
    if data.day != data.today or data.first_slot == 3:
        return None
    belief = run_filter(data.records, data.feedback, data.week_start)
    planner, dp = plan_day(data, belief.belief)
    open_now = [b for b in dp.blocks if b.slot == SLOTS[data.first_slot]
                and b.kind not in ("bedtime", "day_sleep", "shift_nap")]
    if not open_now:
        if store:
            store_plan(db, data, dp, model=PLANNER_NAME, observed=belief.observed, notes=[], picks={})
        return None
    fixed = week_fixed(db, dp, data.week_start, data.day, data.tz)
    prompt = model_prompt(data.week, fixed, data.feedback, FORMAT_V4, filters=belief.filters)
    row: dict[str, Any] = {
        "day": day.isoformat(), "slot": SLOTS[data.first_slot], "at": now.strftime("%H:%M"),
        "prompt": prompt, "objective": objective_line(objective_facts(dp, open_now[0].slot)),
        "action": open_now[0].action,
        "answer": format_output(open_now[0].action, dp.belief),
    }
    picks: dict[str, str | None] = {}
    chosen = PLANNER_NAME
    if model is not None:
        asked = ask_model(db, model, data, belief.filters, planner, dp)
        row["model"] = asked.picks.get("model")
        row["stood"] = asked.model is not None
        row["note"] = asked.notes[0] if asked.notes else None
        picks, chosen = asked.picks, asked.model or PLANNER_NAME
    if store:
        store_plan(db, data, dp, model=chosen, observed=belief.observed, notes=[], picks=picks)
    return row


def history_rule(seed: int) -> tuple[str | None, float]:
    """The hidden rule the person of ``seed`` answers by (None: they never answer) and their
    base acceptance (``HISTORY_RULES``, ``BASE_ACCEPT``)."""
    rng = np.random.default_rng([int(seed), TIME_STREAM, 2])
    rule = HISTORY_RULES[int(rng.integers(len(HISTORY_RULES)))]
    return rule, float(rng.uniform(*BASE_ACCEPT))


def answer_day(db: Any, day: date, tz: Any, rule: str, base: float, seed: int) -> int:
    """Answer every block of ``day``'s last stored plan by ``rule`` (``lab.answer_rules``)
    through ``rhythm feedback``'s path; the answers given."""
    from rhythm.recommend import record_answer

    _pd, said = answer_plan(db, day, tz, RULES[rule], base, seed)
    for rec_id, response in said.items():
        record_answer(db, rec_id, response)
    return len(said)


def person_decisions(seed: int, days: int, shift_share: float = SHIFT_SHARE,
                     model: Path | None = None, kind: str | None = None,
                     run_share: float = RUN_SHARE, history: bool = False) -> list[dict[str, Any]]:
    """Every decision of the person of ``seed`` (module docstring; ``kind``:
    ``generated_person``; ``history``: plans stored, days answered by a hidden rule)."""
    from storage import open_db

    person = generated_person(seed, days, shift_share, kind)
    rule, base = history_rule(seed) if history else (None, 1.0)
    out = []
    with tempfile.TemporaryDirectory(prefix="rhythm-planner-days-") as tmp:
        s = home_of(person, Path(tmp))
        tz = ZoneInfo(person.zone)
        with open_db(s.database) as db:
            times = ask_times(seed, person.days, tz, run_share)
            for k, (d, _slot, now) in enumerate(times):
                row = decide(db, s, d, now, model, store=history)
                if row is not None:
                    out.append({"format": FORMAT, "seed": int(seed), "person": person.name, "kind": person.kind,
                                **row, **({"rule": rule} if history else {})})
                if history and rule is not None and (k + 1 == len(times) or times[k + 1][0] != d):
                    answer_day(db, d, tz, rule, base, seed)  # the day is over: its answers
    return out


def _job(unit: tuple[int, int, float, float, bool]) -> list[str]:
    import os

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    seed, days, share, run_share, history = unit
    return [json.dumps(r, separators=(",", ":"))
            for r in person_decisions(seed, days, share, run_share=run_share, history=history)]


def write_examples(out: Path, people: int, seed_start: int, days: int, workers: int = 2,
                   shift_share: float = SHIFT_SHARE, progress: Callable[[int, int], None] | None = None,
                   executor: Any = None, run_share: float = RUN_SHARE, history: bool = False) -> dict[str, Any]:
    """Write ``out/examples.jsonl`` (one person is one unit; resumable) and return a summary."""
    from training.executors import LocalPool, unit_lines

    out.mkdir(parents=True, exist_ok=True)
    t0 = _time.time()
    if not 0.0 <= run_share <= 1.0:
        raise ValueError(f"run_share must be within 0 and 1, not {run_share}")
    units = [(s, int(days), float(shift_share), float(run_share), bool(history))
             for s in range(int(seed_start), int(seed_start) + int(people))]
    finished = 0

    def person_done(_lines: int) -> None:
        nonlocal finished
        finished += 1
        if progress:
            progress(finished, len(units))

    actions: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    n = 0
    for line in unit_lines(out / "examples.jsonl", _job, units, executor or LocalPool(workers), person_done):
        rec = json.loads(line)
        actions[rec["action"]] += 1
        kinds[rec["kind"]] += 1
        if history:
            rules[str(rec.get("rule"))] += 1
        n += 1
    seconds = _time.time() - t0
    summary = {
        "format": FORMAT, "people": len(units), "seed_start": int(seed_start), "days": int(days),
        "run_share": float(run_share), "history": bool(history),
        **({"rules": dict(sorted(rules.items()))} if history else {}),
        "decisions": n, "planner_actions": dict(sorted(actions.items())), "kinds": dict(sorted(kinds.items())),
        "seconds": round(seconds, 1), "decisions_per_second": round(n / seconds, 2) if seconds else None,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(args: Args, progress: Progress = no_progress) -> dict[str, Any]:
    out = prepare_output(args.out, "planner_days", args, [])
    summary = write_examples(out, args.people, args.seed_start, args.days, args.workers, args.shift_share,
                             progress=lambda n, total: progress("planner-days", n, total),
                             run_share=args.run_share, history=args.history)
    log(f"planner-days: {summary['decisions']} decisions from {summary['people']} people in "
        f"{summary['seconds']:.0f} s ({summary['decisions_per_second']}/s)")
    finish_output(out, summary)
    return summary


if __name__ == "__main__":
    main(parse_args(Args))
