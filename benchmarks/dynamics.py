"""One-step prediction of a person's meters: no change, the simulator's dynamics, the
person's fitted dynamics (agent.personal), on held-out days.

Run:  nice python benchmarks/dynamics.py [--db PATH ...] [--seeds 3] [--days 120] [--json]

For each history, the personal dynamics are fitted on the earlier days and every step of
the last quarter of the days (predicting a slot's meters from the previous slot's meters
and the slot's action) is scored: the mean absolute error over the meter components
observed at both ends. Histories:

- generated in the real meter space (lab/people/meter_histories.py: a person whose
  evening exercise restores, one whose exercise drains, one with a calendar's effects on
  every meter, one with no effect at all), ``--seeds`` each;
- a generated person written through the storage writer and mapped by `rhythm map`
  (lab/people/insight_person.py: 100 days of wearable data and a calendar, evening runs
  that raise the next morning's HRV and lower its stress);
- every database given with ``--db`` (e.g. a sample person's import; its stored meters
  and slot actions, as `rhythm map` left them).

Also the option the fit was chosen over (docs/agent.md, "Personal dynamics on real data"):
real meters turned into carry-over levels (each slot moves a level a third of the way to
the slot's score), predicted by the simulator's dynamics, against no change on the same
levels (columns ``levels: simulator / no change``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from agent.personal import (  # noqa: E402
    SlotMeters,
    heldout_errors,
    prediction_errors,
    transitions,
)
from common.records import ACTIONS, METERS, SLOTS  # noqa: E402

LEVEL_RATE = 1.0 / 3.0


def _progress(msg: str) -> None:
    sys.stderr.write(f"\r{msg:<60}")
    sys.stderr.flush()


def levels(slots: list[SlotMeters]) -> list[SlotMeters]:
    """Carry-over levels: each meter's level moves ``LEVEL_RATE`` of the way to the slot's
    score (a missing score: the level stays); starts at the first score."""
    out = []
    lev = np.full(5, np.nan)
    for s in sorted(slots, key=lambda x: (x.day, x.slot)):
        m = np.array([np.nan if v is None else float(v) for v in s.meters])
        new = np.where(np.isnan(lev), m, lev + LEVEL_RATE * (np.nan_to_num(m, nan=0.0) - lev))
        lev = np.where(np.isfinite(m), new, lev)
        out.append(SlotMeters(s.day, s.slot, tuple(None if not np.isfinite(v) else float(v) for v in lev), s.action))
    return out


def level_errors(slots: list[SlotMeters], test_from: date | None) -> dict[str, float]:
    """The simulator's dynamics and no change on the carry-over levels, same test days."""
    steps = [st for st in transitions(levels(slots)) if test_from is not None and st.day >= test_from]
    return {k: v for k, (v, _) in prediction_errors(steps, None).items()}


def evaluate(name: str, slots: list[SlotMeters]) -> dict:
    held = heldout_errors(slots)
    lv = level_errors(slots, held.test_from)
    f = held.fit
    return {
        "history": name,
        "days": len({s.day for s in slots}),
        "train_steps": held.train_steps,
        "test_steps": held.test_steps,
        "mae": {k: v for k, (v, _n) in held.errors.items()},
        "components": held.errors["fitted"][1],
        "levels_mae": lv,
        "kappa": f.kappa,
        "departures": [(ACTIONS[d["action"]], METERS[d["meter"]], round(d["fitted"] - d["table"], 3))
                       for d in f.departures()],
    }


def generated(seeds: int, days: int) -> list[dict]:
    from lab.people.meter_histories import PEOPLE, history

    out = []
    for name, person in PEOPLE.items():
        for seed in range(seeds):
            _progress(f"generated {name} seed {seed}")
            out.append(evaluate(f"generated:{name}:{seed}", history(person, days, seed)))
    return out


def from_db(path: Path) -> list[SlotMeters]:
    from storage import open_db
    from storage.derived import slot_history

    with open_db(path, read_only=True) as db:
        rows = slot_history(db, None, 100_000)
    return [SlotMeters(r.day, SLOTS.index(r.slot), tuple(r.meters),
                       ACTIONS.index(r.action) if r.action in ACTIONS else None)
            for r in rows if r.slot in SLOTS]


def mapped_person() -> list[SlotMeters]:
    """lab/people/insight_person.py written through storage and mapped, in a temp home."""
    from lab.people import insight_person
    from rhythm import jobs
    from rhythm.settings import init_home, load_settings
    from storage import open_db
    from storage.writer import write_records

    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(home=Path(tmp), env={}, timezone="Europe/Amsterdam")
        init_home(settings)
        with open_db(settings.database) as db:
            write_records(db, insight_person.records())
        now = datetime.combine(insight_person.LAST + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
        jobs.map_data(settings, now=now.replace(hour=12))
        return from_db(settings.database)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", action="append", default=[], help="a Rhythm database (repeatable)")
    ap.add_argument("--seeds", type=int, default=3, help="generated histories per person")
    ap.add_argument("--days", type=int, default=120, help="days per generated history")
    ap.add_argument("--no-mapped", action="store_true", help="skip the generated person through storage and mapping")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)

    rows = generated(args.seeds, args.days)
    if not args.no_mapped:
        _progress("generated person through storage and mapping")
        rows.append(evaluate("generated:mapped-person", mapped_person()))
    for p in args.db:
        _progress(f"database {p}")
        rows.append(evaluate(f"db:{p}", from_db(Path(p))))
    sys.stderr.write("\r" + " " * 60 + "\r")
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    head = ("history", "days", "test steps", "no change", "simulator", "fitted", "levels: sim / no change",
            "departures")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        m, lv = r["mae"], r["levels_mae"]
        deps = ", ".join(f"{a} {k} {d:+.2f}" for a, k, d in r["departures"][:3]) or "-"
        print(f"| {r['history']} | {r['days']} | {r['test_steps']} | {m['no_change']:.4f} | {m['simulator']:.4f} | "
              f"**{m['fitted']:.4f}** | {lv['simulator']:.4f} / {lv['no_change']:.4f} | {deps} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
