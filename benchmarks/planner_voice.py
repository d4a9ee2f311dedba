"""Does the local model speak with the planner's voice? Veto rate and agreement on held-out people.

    .venv/bin/python benchmarks/planner_voice.py --models before=rhythm/models/student-real-q8_0.gguf \\
        after=runs/planner-tune/export/student-real-q8_0.gguf --json runs/voice.json

People no training run uses (``lab.planner_days`` trains on seeds 3,000,000 on): the
shift-people kinds of ``lab.people.shift_people`` on seeds 0 .. ``--shift``-1 (office,
rotating shifts, night nurse, parent, student, retiree in turn; the people of
``benchmarks/plan_quality.py``) and stream people (``lab.streams.synthetic_person``) on seeds
90,000,000 .. (``benchmarks/student_real.py``'s unseen people). Each through the storage
writer and ``rhythm map``; then at a drawn time of each morning, afternoon and evening of the
last ``--days`` days (``--demo``: also the demo person of ``make demo`` on 2025-03-10 ..
03-26, the days issue 37 read), the product's path with the llm backend on each model
(``lab.planner_days.decide``: load, filter, plan, ask): at every slot where the
product asks the model,

- **agreement**: the model's pick equals the day planner's;
- **veto rate**: the share of asks where the planner's checks refuse the pick
  (``agent.day.with_model_pick``: the slot cannot hold it, or the belief's model rates it
  clearly worse) or the model gives no valid answer: the planner's block stands.

With ``--history`` the days are lived as the product lives them (``lab.planner_days``'s
history: each plan stored, the model's pick in it where it stood, and each day answered by
the person's hidden rule), so each model meets its own later days; agreement is then with the
planner on that model's days. The demo person is planned without answers either way.

Goal (issue 37): veto rate <= 10% on real-shaped days. The people run on ``--workers``
processes.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STREAM_SEED = 90_000_000


def demo_decisions(model: Path) -> list[dict[str, Any]]:
    """The demo person (``make demo``: the bundled sample files imported and mapped) on the
    days the issue read, 2025-03-10 .. 03-26, asked at the drawn times of ``ask_times``."""
    import tempfile
    from datetime import date, timedelta
    from zoneinfo import ZoneInfo

    from lab.planner_days import ask_times, decide
    from lab.streams import throwaway_home
    from rhythm import jobs
    from rhythm.data.make_sample import SAMPLE_TIMEZONE
    from rhythm.demo import SAMPLE_DIR, SAMPLE_FILES
    from storage import open_db

    days = [date(2025, 3, 10) + timedelta(days=k) for k in range(17)]
    out = []
    with tempfile.TemporaryDirectory(prefix="rhythm-voice-demo-") as tmp:
        s = throwaway_home(Path(tmp), "demo", SAMPLE_TIMEZONE)
        for source, name, _label in SAMPLE_FILES:
            jobs.import_file(s, source, SAMPLE_DIR / name)
        jobs.map_data(s)
        with open_db(s.database) as db:
            for d, _slot, now in ask_times(0, days, ZoneInfo(SAMPLE_TIMEZONE)):
                row = decide(db, s, d, now, model)
                if row is not None:
                    out.append({"person": "demo", "kind": "demo", **row})
    return out


DEMO_SEED = -1  # the unit of the demo person


def person_rows(unit: tuple[int, str, int, list[tuple[str, str]], bool]) -> list[dict[str, Any]]:
    """One person's decisions with every model (a worker job)."""
    from lab.planner_days import person_decisions

    seed, kind, days, models, history = unit
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for name, path in models:
        found = (demo_decisions(Path(path)) if kind == "demo"
                 else person_decisions(seed, days, model=Path(path), kind=kind, history=history))
        for r in found:
            row = rows.setdefault((r["day"], r["slot"]), {k: r[k] for k in ("person", "kind", "day", "slot", "at",
                                                                              "action")})
            row[name] = r["model"]
            row[f"{name}_stood"] = r["stood"]
            row[f"{name}_planner"] = r["action"]  # with history, the planner on this model's days
    return list(rows.values())


def summarize(rows: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"decisions": len(rows), "planner": dict(Counter(r["action"] for r in rows).most_common())}
    for n in names:
        mine = [r for r in rows if n in r]  # with history a model may meet a slot another does not
        vetoed = sum(not r[f"{n}_stood"] for r in mine)
        out[n] = {
            "asks": len(mine),
            "agreement": round(sum(r[n] == r[f"{n}_planner"] for r in mine) / max(1, len(mine)), 3),
            "veto_rate": round(vetoed / max(1, len(mine)), 3), "vetoed": vetoed,
            "stood_not_planner": sum(r[f"{n}_stood"] and r[n] != r[f"{n}_planner"] for r in mine),
            "picks": dict(Counter(r[n] for r in mine).most_common()),
        }
    return out


def table(report: dict[str, Any], names: list[str]) -> str:
    head = "| people | decisions | " + " | ".join(f"{n} agreement | {n} veto rate" for n in names) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(names))]
    for group, s in report["groups"].items():
        cells = [f"{s[n]['agreement']:.2f} | {s[n]['veto_rate']:.2f} ({s[n]['vetoed']})" for n in names]
        lines.append(f"| {group} | {s['decisions']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", required=True, help="name=path.gguf (v4 or v6 students)")
    ap.add_argument("--shift", type=int, default=12, help="shift-people (seeds 0..N-1)")
    ap.add_argument("--streams", type=int, default=6, help="stream people (seeds 90,000,000 on)")
    ap.add_argument("--days", type=int, default=7, help="planned days per person")
    ap.add_argument("--demo", action="store_true", help="also the demo person (make demo), 2025-03-10 .. 03-26")
    ap.add_argument("--history", action="store_true", help="plans stored and days answered (module docstring)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write the report (with every decision) here")
    args = ap.parse_args()
    from training.executors import LocalPool

    models = [tuple(m.split("=", 1)) for m in args.models]
    names = [n for n, _ in models]
    units = ([(s, "shift", args.days, models, args.history) for s in range(args.shift)]
             + [(STREAM_SEED + k, "stream", args.days, models, args.history) for k in range(args.streams)]
             + ([(DEMO_SEED, "demo", 17, models, False)] if args.demo else []))
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    results: dict[int, list[dict[str, Any]]] = {}
    for i, res in LocalPool(args.workers).map_units(
            person_rows, units, lambda n, total: print(f"people {n}/{total}", file=sys.stderr, flush=True)):
        results[i] = res
    for i in sorted(results):
        rows += results[i]
    kinds = sorted({r["kind"] for r in rows})
    groups = {"all": summarize(rows, names)}
    for k in kinds:
        groups[k] = summarize([r for r in rows if r["kind"] == k], names)
    report = {"models": dict(models), "people": len(units), "days": args.days, "history": args.history,
              "groups": groups,
              "seconds": round(time.time() - t0, 1), "rows": rows}
    print(table(report, names))
    print(f"\n{len(rows)} decisions of {len(units)} held-out people in {report['seconds']:.0f} s")
    for n in names:
        print(f"{n}: picks {groups['all'][n]['picks']}")
    print(f"planner: {groups['all']['planner']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
