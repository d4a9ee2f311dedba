"""`rhythm insights` statistics on generated histories: false alarms, false discoveries, power.

Run:  nice python benchmarks/insights.py [--seeds 200] [--days 120]

On the day tables of lab/people/insight_histories.py (the default factor set plus
title:Choir: 59 factors x 29 outcomes x 2 lags, about 2,200 comparisons that reach the
3-day floor):

- null histories (no effect anywhere), as generated and with streaky factors and drifting
  meters: the share of histories with any finding at q < 0.1 (every finding is false there;
  Benjamini-Hochberg at 0.1 allows up to 10 %);
- histories with three planted effects (an evening workout +0.15 serenity the next morning,
  a late meeting -0.12 vitality the next morning, choir +0.10 connection the next day): how
  often each is found, and the share of findings that are not a planted effect (the false-
  discovery proportion, averaged);
- the planted workout effect at smaller sizes: how often it is found at 120 days.

Prints a table per part, and the time per history.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from common.records import SLOTS  # noqa: E402
from lab.people.insight_histories import Planted, history  # noqa: E402
from mapping.insights import DailyTable, compare  # noqa: E402

PLANTED = (
    Planted("workout@evening", "serenity@morning", 1, +0.15),
    Planted("late-meeting", "vitality@morning", 1, -0.12),
    *(Planted("title:Choir", f"connection@{s}", 1, +0.10) for s in SLOTS),
)
RATES = {"workout@evening": 0.3, "late-meeting": 0.3, "title:Choir": 0.3}


def _progress(i: int, n: int, label: str) -> None:
    sys.stderr.write(f"\r{label}: {i}/{n}")
    sys.stderr.flush()
    if i == n:
        sys.stderr.write("\n")


def null_rate(seeds: int, days: int, **kw) -> tuple[int, int, float]:
    hits = tested = 0
    t = time.process_time()
    for s in range(seeds):
        r = compare(history(10_000 + s, days=days, **kw))
        hits += bool(r.findings)
        tested = len(r.tested)
        _progress(s + 1, seeds, "null")
    return hits, tested, (time.process_time() - t) / seeds


def _is_planted(c, planted) -> bool:
    return any(c.factor.name == p.factor and c.lag_days == p.lag
               and c.outcome.name in (p.outcome, p.outcome.split("@")[0]) for p in planted)


def planted_run(seeds: int, days: int) -> tuple[dict[str, int], float]:
    found = {"workout@evening": 0, "late-meeting": 0, "title:Choir": 0}
    fdp = []
    for s in range(seeds):
        r = compare(history(20_000 + s, days=days, planted=PLANTED, rates=RATES))
        f = r.findings
        for name in found:
            p = [x for x in PLANTED if x.factor == name]
            found[name] += any(_is_planted(c, p) and (c.effect > 0) == (p[0].delta > 0) for c in f)
        fdp.append(sum(not _is_planted(c, PLANTED) for c in f) / max(1, len(f)))
        _progress(s + 1, seeds, "planted")
    return found, float(np.mean(fdp))


def _found_workout(r) -> bool:
    return any(c.factor.name == "workout@evening" and c.outcome.name == "serenity@morning"
               and c.lag_days == 1 and c.effect > 0 for c in r.findings)


def power_curve(seeds: int, days: int, sizes=(0.04, 0.06, 0.08, 0.10)) -> dict[float, tuple[float, float]]:
    """Share of histories where the planted effect is found: among every built-in factor,
    and asked alone (``--factor workout@evening``: its 58 comparisons only)."""
    out = {}
    for delta in sizes:
        hits = alone = 0
        for s in range(seeds):
            table = history(30_000 + s, days=days, rates={"workout@evening": 0.3},
                            planted=[Planted("workout@evening", "serenity@morning", 1, delta)])
            hits += _found_workout(compare(table))
            only = {f: v for f, v in table.factors.items() if f.name == "workout@evening"}
            alone += _found_workout(compare(DailyTable(table.first, table.last, only, table.outcomes)))
        out[delta] = (hits / seeds, alone / seeds)
        _progress(sizes.index(delta) + 1, len(sizes), "power")
    return out


def _null_part(n: int, days: int) -> None:
    print(f"## Null histories ({n} seeds, {days} days): any finding at q < 0.1 (all false)\n")
    print("| history | with a finding | comparisons tested | CPU s / history |")
    print("|---|---|---|---|")
    for label, kw in (("as generated (persistence 0.3, AR(1) 0.5)", {}),
                      ("streaks and drift (persistence 0.7, AR(1) 0.8)", {"persistence": 0.7, "rho": 0.8})):
        hits, tested, sec = null_rate(n, days, **kw)
        print(f"| {label} | {hits}/{n} ({hits / n:.1%}) | {tested} | {sec:.2f} |")


def _planted_part(m: int, days: int) -> None:
    found, fdp = planted_run(m, days)
    print(f"\n## Planted effects ({m} seeds, {days} days, factor on 30 % of days)\n")
    print("| effect | found (right sign, q < 0.1) |")
    print("|---|---|")
    for name, label in (("workout@evening", "evening workout -> serenity next morning +0.15"),
                        ("late-meeting", "late meeting -> vitality next morning -0.12"),
                        ("title:Choir", "title:Choir -> connection next day +0.10")):
        print(f"| {label} | {found[name]}/{m} |")
    print(f"\nMean false-discovery proportion among the findings: {fdp:.3f} (BH target <= 0.1)")


def _power_part(p: int, days: int) -> None:
    curve = power_curve(p, days)
    print(f"\n## Power: evening workout -> serenity next morning ({p} seeds, {days} days, meter sd 0.08)\n")
    print("| effect | found among every built-in factor | found when asked alone |")
    print("|---|---|---|")
    for delta, (share, alone) in curve.items():
        print(f"| +{delta:.2f} ({delta / 0.08:.2g} sd) | {share:.0%} | {alone:.0%} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200, help="histories per row")
    ap.add_argument("--days", type=int, default=120, help="days per history")
    ap.add_argument("--only", choices=("null", "planted", "power"), help="run one part")
    args = ap.parse_args()
    n = args.seeds
    if args.only in (None, "null"):
        _null_part(n, args.days)
    if args.only in (None, "planted"):
        _planted_part(max(20, n // 4), args.days)
    if args.only in (None, "power"):
        _power_part(max(20, n // 4), args.days)


if __name__ == "__main__":
    main()
