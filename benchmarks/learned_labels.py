"""Labels learned from behaviour (issue 40): precision and recall on generated people.

    PYTHONPATH=. python benchmarks/learned_labels.py [--people 30] [--days 42] [--seed 0]

Each person (lab/people/label_people.py) has a calendar with titles no keyword table knows
for things their watch records (a weekly sport with workouts, brisk walks with many steps,
naps), titles for other things (meetings, clubs) that a random workout, a run right after,
or a walking meeting sometimes overlaps, and known titles. The person's records go through
the real storage writer into DuckDB; ``rhythm.derive.relearn`` (the storage SQL and the pure
learner, mapping/labels.py) learns labels; then ``rhythm.derive.rebuild`` maps the history
with them and we count the events each applied label decided.

Printed: per person-title, applied labels right / applied (precision), right applied /
titles a label could be learned for (recall: exercise, walk, nap titles), the proposed
ones, and a few evidence lines.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.people.label_people import START, TZ, person  # noqa: E402
from mapping import labels as L  # noqa: E402
from rhythm.derive import rebuild, relearn  # noqa: E402
from storage import open_db  # noqa: E402
from storage.writer import write_records  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--people", type=int, default=30)
    ap.add_argument("--days", type=int, default=42)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    counts: Counter[str] = Counter()
    examples: list[str] = []
    wrong: list[str] = []
    events_relabelled = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.people):
            p = person(args.seed + k, args.days)
            with open_db(Path(tmp) / f"p{k}.duckdb") as db:
                write_records(db, p.records)
                learned = relearn(db)
                summary = rebuild(db, None, tz=TZ, today=START + timedelta(days=args.days))
                events_relabelled += summary.get("labels_learned", 0)
            learnable = {t for t, kind in p.kinds.items() if kind in ("exercise", "walk", "nap")}
            counts["learnable"] += len(learnable)
            by_title = {lab.pattern: lab for lab in learned}
            for lab in learned:
                gold = p.truth.get(lab.pattern)
                ok = gold == lab.action
                if lab.applied:
                    counts["applied"] += 1
                    counts["applied_right"] += ok
                    if not ok:
                        wrong.append(f"  person {k}: {lab.evidence} -> {lab.action}, truly {gold}")
                    elif len(examples) < 6:
                        examples.append(f"  person {k}: {lab.evidence} -> {lab.action}")
                else:
                    counts["proposed"] += 1
                    counts["proposed_right"] += ok
            counts["recalled"] += sum(1 for t in learnable if t in by_title and by_title[t].applied
                                      and by_title[t].action == p.truth[t])
    prec = counts["applied_right"] / counts["applied"] if counts["applied"] else float("nan")
    rec = counts["recalled"] / counts["learnable"] if counts["learnable"] else float("nan")
    print(f"people {args.people}, {args.days} days each, seed {args.seed}; thresholds: apply at >= "
          f"{L.APPLY_MIN_OCCURRENCES} occurrences and >= {L.APPLY_MIN_SHARE:.0%} coinciding, propose at >= "
          f"{L.SUGGEST_MIN_OCCURRENCES} and >= {L.SUGGEST_MIN_SHARE:.0%}")
    print(f"applied learned labels: {counts['applied']} ({counts['applied_right']} right): precision {prec:.3f}")
    print(f"titles a label could be learned for: {counts['learnable']}, learned right: {counts['recalled']}: "
          f"recall {rec:.3f}")
    print(f"proposed (not applied): {counts['proposed']} ({counts['proposed_right']} right)")
    print(f"events the applied learned labels decided after rhythm map: {events_relabelled}")
    print("evidence, right:")
    print("\n".join(examples) or "  none")
    print("evidence, wrong:")
    print("\n".join(wrong[:8]) or "  none")
    print(f"time {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
