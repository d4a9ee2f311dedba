"""Calibrate the grader constants A, Q, E (and, only if needed, the progress drift); spec 9.

Run:  python -m simulator.calibrate            (a few seconds; prints the search and the choice)

Procedure (deterministic):

1. For each candidate progress drift, from the spec's 0.022 down to 0.015 in steps of 0.001
   (a lower drift is the only direction that lifts random relative to the heuristic), play
   random, heuristic, greedy-true and greedy-neutral under the three protocol conditions on
   the batch engine. Trajectories do not depend on A, Q, E, so each drift is played once.
2. Re-score the recorded episodes on the grid A in [0.10, 3.00], Q in [0.05, 2.00],
   E in [0.05, 2.00] (step 0.05). Feasible: in-dist random within 0.02 of 0.393, heuristic
   within 0.03 of 0.463, greedy-true at least 0.03 above greedy-neutral. A point *lands* when
   both in-dist means are within 0.002 of their targets (well inside the Monte-Carlo
   interval of 100 episodes, about +-0.01).
3. Keep the drift closest to 0.022 that has a landing point; among its landing points take
   the one closest (Euclidean) to the prototype's (A, Q, E) = (0.5, 0.8, 0.5), i.e. move the
   constants as little as possible. If no drift lands, the feasible point with the smallest
   in-dist squared error over all drifts is reported. The OOD and discrete figures are not
   targets (spec 9: "report all three conditions as they come out").

The chosen values are frozen by hand in ``simulator/spec.py`` (GRADER_A/Q/E, DRIFT_P) and
documented in docs/simulator.md; the script reports whether spec.py matches its choice.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from simulator import spec
from simulator.evaluate import PUBLISHED, episode_plan, run_batch
from simulator.policies import GreedyPolicy, HeuristicPolicy, RandomPolicy

POLICIES = ("random", "heuristic", "greedy-true", "greedy-neutral")
TARGET_RANDOM = PUBLISHED["random"]["in-dist"]  # 0.393
TARGET_HEURISTIC = PUBLISHED["heuristic"]["in-dist"]  # 0.463
TOL_RANDOM, TOL_HEURISTIC, MIN_GAP = 0.02, 0.03, 0.03
LAND = 0.002
PROTOTYPE = (0.5, 0.8, 0.5)


@dataclass(frozen=True)
class Choice:
    drift: float
    a: float
    q: float
    e: float
    feasible: int
    cost: float
    scores: dict[tuple[str, str], float]  # (policy, condition) -> mean final_score


def grid(lo: float, hi: float, step: float) -> np.ndarray:
    return np.round(np.arange(lo, hi + step / 2, step), 6)


def make_policy(name: str, drift: float):
    if name == "random":
        return RandomPolicy()
    if name == "heuristic":
        return HeuristicPolicy()
    return GreedyPolicy(use_truth=name == "greedy-true", progress_drift=drift)


def play(drift: float) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """Grade arrays of the four policies under the three conditions, for one drift."""
    out = {}
    for name in POLICIES:
        for cond in spec.CONDITIONS:
            seeds, profiles, env_cond = episode_plan(cond)
            out[name, cond] = run_batch(
                make_policy(name, drift), seeds, env_cond, profiles, progress_drift=drift
            )
    return out


def mean_scores(
    g: dict[str, np.ndarray], a: np.ndarray, q: np.ndarray, e: np.ndarray
) -> np.ndarray:
    """Mean final_score over the episodes for every (A, Q, E) of the grid: (len A, len Q, len E).

    Adaptation depends on (A, Q) and efficiency on E only, so they are averaged separately."""
    w = spec.GRADER_WEIGHTS
    fixed = sum(w[k] * g[k] for k in ("crash_free", "progress", "connection", "belief_accuracy"))
    early, late, mean_r = g["early_reward"], g["late_reward"], g["mean_reward"]
    adapt = np.clip(0.5 + (late - early)[None, None, :] / a[:, None, None], 0.0, 1.0) * np.clip(
        late[None, None, :] / q[None, :, None], 0.0, 1.0
    )
    eff = np.clip(mean_r[None, :] / e[:, None], 0.0, 1.0)
    return (
        fixed.mean()
        + w["adaptation"] * adapt.mean(axis=2)[:, :, None]
        + w["efficiency"] * eff.mean(axis=1)[None, None, :]
    )


def search(
    games: dict[tuple[str, str], dict[str, np.ndarray]], a: np.ndarray, q: np.ndarray, e: np.ndarray
) -> tuple[int, tuple[int, int, int] | None, bool, dict[tuple[str, str], np.ndarray]]:
    """(feasible count, chosen index or None, whether it lands, score grids) for one drift."""
    s = {k: mean_scores(g, a, q, e) for k, g in games.items()}
    dr = np.abs(s["random", "in-dist"] - TARGET_RANDOM)
    dh = np.abs(s["heuristic", "in-dist"] - TARGET_HEURISTIC)
    gap = s["greedy-true", "in-dist"] - s["greedy-neutral", "in-dist"]
    feasible = (dr <= TOL_RANDOM) & (dh <= TOL_HEURISTIC) & (gap >= MIN_GAP)
    if not feasible.any():
        return 0, None, False, s
    lands = feasible & (dr <= LAND) & (dh <= LAND)
    if lands.any():
        aa, qq, ee = np.meshgrid(a, q, e, indexing="ij")
        dist = (aa - PROTOTYPE[0]) ** 2 + (qq - PROTOTYPE[1]) ** 2 + (ee - PROTOTYPE[2]) ** 2
        cost = np.where(lands, dist, np.inf)
    else:
        cost = np.where(feasible, dr**2 + dh**2, np.inf)
    idx = np.unravel_index(int(np.argmin(cost)), cost.shape)
    return int(feasible.sum()), idx, bool(lands.any()), s


def calibrate(
    drifts: list[float], a: np.ndarray, q: np.ndarray, e: np.ndarray, log=print
) -> Choice | None:
    """Run the procedure of the module docstring; ``log`` receives the search lines."""
    log(
        f"grid: A {a[0]}..{a[-1]} ({len(a)}), Q {q[0]}..{q[-1]} ({len(q)}), E {e[0]}..{e[-1]} ({len(e)})"
    )
    log(
        f"{'drift':>7} {'feasible':>9} {'A':>5} {'Q':>5} {'E':>5} {'random':>7} {'heur':>7} "
        f"{'gap':>7}  lands"
    )
    best = None
    for drift in drifts:
        t0 = time.perf_counter()
        games = play(-abs(drift))
        count, idx, lands, s = search(games, a, q, e)
        if idx is None:
            log(
                f"{abs(drift):7.3f} {0:9d}   (no feasible point)  [{time.perf_counter() - t0:.1f}s]"
            )
            continue
        scores = {k: float(v[idx]) for k, v in s.items()}
        r, h = scores["random", "in-dist"], scores["heuristic", "in-dist"]
        gap = scores["greedy-true", "in-dist"] - scores["greedy-neutral", "in-dist"]
        err = (r - TARGET_RANDOM) ** 2 + (h - TARGET_HEURISTIC) ** 2
        choice = Choice(
            -abs(drift), float(a[idx[0]]), float(q[idx[1]]), float(e[idx[2]]), count, err, scores
        )
        log(
            f"{abs(drift):7.3f} {count:9d} {choice.a:5.2f} {choice.q:5.2f} {choice.e:5.2f} "
            f"{r:7.4f} {h:7.4f} {gap:7.4f}  {'yes' if lands else 'no'}"
            f"  [{time.perf_counter() - t0:.1f}s]"
        )
        if lands:
            return choice
        if best is None or err < best.cost:
            best = choice
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=float, default=0.05, help="grid step for A, Q and E")
    args = parser.parse_args(argv)
    a, q, e = grid(0.10, 3.00, args.step), grid(0.05, 2.00, args.step), grid(0.05, 2.00, args.step)
    start = abs(spec.SPEC_DRIFT_P)
    drifts = [round(start - 0.001 * i, 3) for i in range(8)]  # 0.022 .. 0.015
    choice = calibrate(drifts, a, q, e)
    if choice is None:
        print("no feasible calibration found")
        return 1
    print()
    print(
        f"chosen: progress drift {abs(choice.drift):.3f}, A = {choice.a:.2f}, Q = {choice.q:.2f}, E = {choice.e:.2f}"
    )
    print(f"{'policy':<16}" + "".join(f"{c:>10}" for c in spec.CONDITIONS) + "   published")
    for name in POLICIES:
        pub = PUBLISHED.get(name)
        row = "".join(f"{choice.scores[name, c]:10.4f}" for c in spec.CONDITIONS)
        pub_s = " / ".join(f"{pub[c]:.3f}" for c in spec.CONDITIONS) if pub else "-"
        print(f"{name:<16}{row}   {pub_s}")
    frozen = (spec.DRIFT_P, spec.GRADER_A, spec.GRADER_Q, spec.GRADER_E)
    chosen = (choice.drift, choice.a, choice.q, choice.e)
    same = all(abs(x - y) < 1e-9 for x, y in zip(frozen, chosen, strict=True))
    print(
        "spec.py matches the choice"
        if same
        else f"spec.py differs: DRIFT_P, A, Q, E = {frozen}; freeze {chosen} in simulator/spec.py"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
