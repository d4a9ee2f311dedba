"""Evaluation in feedback mode and under the observation conditions (feedback.md 6).

:func:`evaluate_feedback` plays the protocol's episodes (spec 9 seeds) on
:class:`simulator.env.RhythmEnv` with ``feedback`` and ``observe`` set, and adds to the
usual :class:`simulator.evaluate.EvalResult`:

- ``acceptance_rate`` over the week and ``acceptance_rate_by_days`` ("1-2": steps 0-7,
  "6-7": steps 20-27);
- ``belief_mae_after`` k answers, k = 2, 4, 8, 16, 28: the belief the agent holds after k
  answers is the one it emits with its recommendation at step k (it has then read the
  answers to steps 0..k-1); after 28 answers it is the policy's ``final_belief(obs)`` on the
  final observation where it has that hook, else its last emitted belief;
- ``answers_to_mae_015``: per episode the number of answers after which belief_mae stays at
  or below 0.15 for the rest of the week (29 = 28 + 1 if never), averaged;
- ``reference_belief_mae_after``: the same curve of the structureless learner
  (:mod:`simulator.structureless`) played on the same seeds and conditions.

Policies may implement ``configure(feedback=..., observe=...)``: called once before the
episodes, so an agent knows how it observes (the product knows its sensors too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from simulator import spec
from simulator.env import RhythmEnv
from simulator.evaluate import EvalResult, episode_plan, summarize
from simulator.feedback import check_observe
from simulator.policies import Policy, get_policy
from simulator.structureless import StructurelessPolicy

ANSWER_KEYS: tuple[int, ...] = (2, 4, 8, 16, 28)
MAE_TARGET = 0.15
NEVER = spec.EPISODE_STEPS + 1
DAY_STEPS: dict[str, range] = {"1-2": range(0, 8), "6-7": range(20, 28)}

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class FeedbackEvalResult:
    """An :class:`EvalResult` plus the feedback-mode measurements (module docstring)."""

    result: EvalResult
    feedback: bool
    observe: str
    acceptance_rate: float | None
    acceptance_rate_by_days: dict[str, float] | None
    belief_mae_after: dict[str, float | None]
    answers_to_mae_015: float
    reference_belief_mae_after: dict[str, float | None] | None
    reference_answers_to_mae_015: float | None
    belief_mae_curve: list[float | None] = field(default_factory=list)
    reference_belief_mae_curve: list[float | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = self.result.to_dict()
        extra = asdict(self)
        extra.pop("result")
        d.update(extra)
        return d


def play_episodes(
    policy: Policy,
    seeds: Sequence[int],
    condition: str = "in-dist",
    profiles: Sequence[str] | None = None,
    feedback: bool = True,
    observe: str = "clean",
    progress: Progress | None = None,
) -> dict[str, np.ndarray]:
    """Play the episodes on ``RhythmEnv(feedback=..., observe=...)``; returns the grade
    arrays (as :func:`simulator.evaluate.run_env`) plus ``accepted`` (N, 28; NaN without
    feedback), ``beliefs`` (N, 29, 3): the belief held after k answers, k = 0..28 (NaN
    before any), ``truth`` (N, 3) and ``mae_curve`` (N, 29)."""
    check_observe(observe)
    if hasattr(policy, "configure"):
        policy.configure(feedback=feedback, observe=observe)
    env = RhythmEnv(condition=condition, feedback=feedback, observe=observe)
    seeds = list(seeds)
    rows: list[dict[str, Any]] = []
    n, t_max = len(seeds), spec.EPISODE_STEPS
    accepted = np.full((n, t_max), np.nan)
    beliefs = np.full((n, t_max + 1, 3), np.nan)
    truth = np.zeros((n, 3))
    for i, seed in enumerate(seeds):
        options = None if profiles is None else {"profile": profiles[i]}
        obs, info = env.reset(seed=int(seed), options=options)
        truth[i] = info["belief_truth"]
        policy.reset(int(seed))
        if hasattr(policy, "observe_truth"):
            policy.observe_truth(info)
        held = None
        terminated = False
        while not terminated:
            t = int(obs["t"])
            action, belief = policy.act(obs)
            if belief is not None:
                held = np.asarray(belief, dtype=np.float64)
            if held is not None:
                beliefs[i, t] = np.clip(held, 0.0, 1.0)
            step_action = action if belief is None else {"action": action, "belief": belief}
            obs, _, terminated, _, info = env.step(step_action)
        final = policy.final_belief(obs) if hasattr(policy, "final_belief") else None
        if final is not None:
            held = np.asarray(final, dtype=np.float64)
        if held is not None:
            beliefs[i, t_max] = np.clip(held, 0.0, 1.0)
        if feedback:
            accepted[i] = [float(a["accepted"]) for a in info["answers"]]
        rows.append(env.grade().to_dict())
        if progress is not None:
            progress(i + 1, n)
    out = {k: np.array([r[k] for r in rows], dtype=np.float64) for k in rows[0] if k != "belief_mae"}
    out["belief_mae"] = np.array([np.nan if r["belief_mae"] is None else r["belief_mae"] for r in rows])
    out["accepted"] = accepted
    out["beliefs"] = beliefs
    out["truth"] = truth
    out["mae_curve"] = np.abs(beliefs - truth[:, None, :]).mean(axis=2)
    return out


def answers_to_target(mae_curve: np.ndarray, target: float = MAE_TARGET) -> np.ndarray:
    """Per episode, the fewest answers k after which belief_mae stays <= ``target`` through
    28 answers; ``NEVER`` (29) if it never does (NaN counts as above)."""
    ok = np.nan_to_num(np.asarray(mae_curve), nan=np.inf) <= target  # (N, 29)
    stays = np.flip(np.logical_and.accumulate(np.flip(ok, axis=1), axis=1), axis=1)
    first = np.argmax(stays, axis=1)
    return np.where(stays.any(axis=1), first, NEVER)


def _curve_means(mae_curve: np.ndarray) -> list[float | None]:
    out: list[float | None] = []
    for k in range(mae_curve.shape[1]):
        col = mae_curve[:, k]
        col = col[np.isfinite(col)]
        out.append(float(col.mean()) if len(col) else None)
    return out


def _at_keys(curve: list[float | None]) -> dict[str, float | None]:
    return {str(k): curve[k] for k in ANSWER_KEYS}


def evaluate_feedback(
    policy: str | Policy,
    condition: str = "in-dist",
    feedback: bool = True,
    observe: str = "clean",
    episodes: int | None = None,
    seed_offset: int = 0,
    progress: Progress | None = None,
    reference: bool = True,
    name: str | None = None,
) -> FeedbackEvalResult:
    """Evaluate a policy (name or instance) in feedback mode / an observation condition on
    the protocol's seeds; ``reference``: also play the structureless learner (feedback only)."""
    pol = get_policy(policy) if isinstance(policy, str) else policy
    name = name or (policy if isinstance(policy, str) else type(policy).__name__)
    seeds, profiles, env_condition = episode_plan(condition, episodes, seed_offset)
    g = play_episodes(pol, seeds, env_condition, profiles, feedback, observe, progress)
    base = summarize(name, condition, g)
    if feedback or observe != "clean":
        base = replace(base, published=None)  # the published figures are of the plain protocol
    curve = _curve_means(g["mae_curve"])
    ref_after = ref_curve = ref_steps = None
    if feedback and reference:
        r = play_episodes(StructurelessPolicy(), seeds, env_condition, profiles, feedback, observe)
        ref_curve = _curve_means(r["mae_curve"])
        ref_after = _at_keys(ref_curve)
        ref_steps = float(answers_to_target(r["mae_curve"]).mean())
    acc = g["accepted"]
    return FeedbackEvalResult(
        result=base,
        feedback=bool(feedback),
        observe=observe,
        acceptance_rate=float(np.nanmean(acc)) if feedback else None,
        acceptance_rate_by_days=(
            {k: float(np.nanmean(acc[:, list(v)])) for k, v in DAY_STEPS.items()} if feedback else None
        ),
        belief_mae_after=_at_keys(curve),
        answers_to_mae_015=float(answers_to_target(g["mae_curve"]).mean()),
        reference_belief_mae_after=ref_after,
        reference_answers_to_mae_015=ref_steps,
        belief_mae_curve=curve,
        reference_belief_mae_curve=ref_curve,
    )
