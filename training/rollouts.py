"""Stage 1: teacher rollouts, written as versioned JSONL.

The teacher (default: the Bayesian agent ``bayes``) plays simulator weeks with fresh
in-distribution profiles. Every line of ``rollouts.jsonl`` is one episode (format
``rhythm-rollouts/1``, training/weeks.py): seed, condition, teacher, the 29 observations
(reset + one per step, the keys the compact prompt needs), the teacher's 28 actions and
beliefs, the true belief, the profile and the grade. Training seeds start at 1,000,000, far from the evaluation
protocol's (0-99, 10000-10049). ``--shaped`` writes weeks shaped like the product's instead
(``rhythm-rollouts/2``, training/realshape.py): the data of prompt format v4.

    python -m training.rollouts --out runs/manual/rollouts --episodes 2000 --workers 2
    python -m training.rollouts --shaped --product-share 0.6 --out runs/v4/rollouts --episodes 4000
    python -m training.rollouts --ray auto --out runs/big/rollouts --episodes 20000

The weeks are cut into units (chunks of seeds) that run on the local process pool or, with
``--ray``, as tasks on a Ray cluster (training/executors.py); the file is the same either
way, and a run stopped half-way continues from the units it wrote when run again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training.common import (
    Progress,
    finish_output,
    help_field,
    log,
    no_progress,
    parse_args,
    prepare_output,
    seed_everything,
)
from training.executors import executor_for
from training.weeks import (
    FORMAT,
    SHAPED_FORMAT,
    observation_record,
    resolve_profile,
    teacher_policy,
    write_weeks,
)

#: Weeks per unit on a Ray cluster (a feedback-mode week costs about 5 s, a clean one less).
RAY_CHUNK = 10


@dataclass
class Args:
    """Teacher rollouts."""

    out: str = help_field(
        "runs/manual/rollouts", "output folder (rollouts.jsonl, args.json, manifest.json)"
    )
    episodes: int = help_field(2000, "number of episodes (weeks)")
    seed_start: int = help_field(
        1_000_000, "first episode seed; episodes use seed_start .. seed_start+episodes-1"
    )
    condition: str = help_field("in-dist", "profile distribution: in-dist or ood")
    profile: str = help_field(
        "",
        "fixed person for every episode: a named profile, or 'seed:N' (per-person data); empty = fresh profile per episode",
    )
    teacher: str = help_field("bayes", "registered policy that plays (bayes, heuristic, ...)")
    shaped: bool = help_field(
        False,
        "write weeks shaped like the product's (rhythm-rollouts/2, training/realshape.py): a "
        "share real-shaped (noisy readings with gaps, unknown actions, the person following "
        "or not, the teacher fed as rhythm recommend feeds it), the rest clean; calendars in some",
    )
    product_share: float = help_field(0.6, "share of real-shaped weeks (--shaped)")
    calendar_share: float = help_field(0.5, "share of weeks with a calendar (--shaped)")
    feedback_share: float = help_field(
        0.0,
        "share of weeks in the simulator's feedback mode (--shaped; noisy, answers-only or clean "
        "observation; the answers in the prompt)",
    )
    world_share: float = help_field(
        0.0, "share of clean weeks in misspecified worlds (--shaped; simulator.worlds)"
    )
    world_teacher: str = help_field("bayes-robust", "the teacher of the misspecified worlds' weeks")
    depleted_share: float = help_field(
        0.0, "share of weeks that start with one meter near empty, progress half the time (--shaped)"
    )
    workers: int = help_field(2, "worker processes")
    ray: str = help_field(
        "",
        "run the units on a Ray cluster instead of local processes: its address, 'auto' (the "
        "cluster this machine joined) or 'local' (a private runtime here); needs rhythm[cluster]",
    )
    seed: int = help_field(0, "global seed (the episodes are seeded by their own seeds)")


def play_episode(
    policy, env, seed: int, teacher: str, condition: str, profile=None
) -> dict[str, Any]:
    """One week with ``policy``; the JSONL record."""
    options = None if profile is None else {"profile": profile}
    obs, info = env.reset(seed=int(seed), options=options)
    policy.reset(int(seed))
    if hasattr(policy, "observe_truth"):
        policy.observe_truth(info)
    observations, actions, beliefs, filters = [observation_record(obs)], [], [], []
    terminated = False
    while not terminated:
        a, b = policy.act(obs)
        if hasattr(policy, "filter_state"):  # the filter, for v4 prompts
            filters.append(policy.filter_state(obs))
        actions.append(int(a))
        beliefs.append(
            None if b is None else [round(float(x), 4) for x in np.asarray(b).reshape(-1)]
        )
        step = (
            int(a) if b is None else {"action": int(a), "belief": np.asarray(b, dtype=np.float64)}
        )
        obs, _, terminated, _, info = env.step(step)
        observations.append(observation_record(obs))
    grade = env.unwrapped.grade().to_dict()
    return {
        "format": FORMAT,
        "seed": int(seed),
        "condition": condition,
        "teacher": teacher,
        "observations": observations,
        "actions": actions,
        "beliefs": beliefs,
        "filters": filters or None,
        "belief_truth": [float(x) for x in info["belief_truth"]],
        "profile": info["profile"],
        "grade": grade,
    }


def shaped_week(seed: int, teacher: str, condition: str, shares: tuple[float, ...],
                world_teacher: str = "bayes-robust") -> dict[str, Any]:
    """One week of ``--shaped`` data: its shape drawn from the seed (``shares``: product,
    calendar, feedback, world and depleted), then played and labelled."""
    from training.realshape import draw_week_shape, product_week, teacher_week

    shape = draw_week_shape(seed, *shares)
    if shape.kind == "product":
        return product_week(seed, condition, shape)
    return teacher_week(seed, condition, shape, teacher if shape.world == "nominal" else world_teacher)


def _shaped_worker(job: tuple[list[int], str, str, tuple[float, ...], str]) -> list[str]:
    seeds, teacher, condition, shares, world_teacher = job
    return [json.dumps(shaped_week(s, teacher, condition, shares, world_teacher), separators=(",", ":"))
            for s in seeds]


def _worker(job: tuple[list[int], str, str, str]) -> list[str]:
    from simulator.env import RhythmEnv

    seeds, teacher, condition, profile_text = job
    policy = teacher_policy(teacher)
    env = RhythmEnv(condition=condition)
    profile = resolve_profile(profile_text)
    return [
        json.dumps(play_episode(policy, env, s, teacher, condition, profile), separators=(",", ":"))
        for s in seeds
    ]


def main(args: Args, progress: Progress = no_progress) -> Path:
    seed_everything(args.seed)
    executor = executor_for(args.ray, args.workers)  # Ray missing: one line, nothing written
    out = prepare_output(args.out, "rollouts", args)
    path = out / "rollouts.jsonl"
    seeds = list(range(args.seed_start, args.seed_start + args.episodes))
    # a unit is a chunk of seeds; on Ray small ones (RAY_CHUNK weeks), so a lost worker
    # costs little and the units do not depend on the cluster's size (a resumed run finds
    # the same units); the file is the same for any chunking
    chunk = RAY_CHUNK if args.ray else max(1, min(50, len(seeds) // max(1, args.workers * 4) or 1))
    if not args.shaped and (args.feedback_share > 0 or args.world_share > 0 or args.depleted_share > 0):
        raise ValueError("--feedback-share, --world-share and --depleted-share are shares of --shaped weeks")
    if args.shaped:
        if args.profile:
            raise ValueError("--shaped draws a person per week; --profile is for teacher weeks")
        worker, jobs = _shaped_worker, [
            (
                seeds[i : i + chunk],
                args.teacher,
                args.condition,
                (args.product_share, args.calendar_share, args.feedback_share, args.world_share,
                 args.depleted_share),
                args.world_teacher,
            )
            for i in range(0, len(seeds), chunk)
        ]
    else:
        worker, jobs = _worker, [
            (seeds[i : i + chunk], args.teacher, args.condition, args.profile)
            for i in range(0, len(seeds), chunk)
        ]
    t0 = time.time()
    done, scores, maes = write_weeks(
        path, worker, jobs, args.workers, "grade", lambda n: progress("rollouts", n, len(seeds)),
        executor,
    )
    summary = {
        "episodes": done,
        "seconds": round(time.time() - t0, 1),
        "teacher_final_score": float(np.mean(scores)),
        "teacher_belief_mae": float(np.mean(maes)) if maes else None,
        "format": SHAPED_FORMAT if args.shaped else FORMAT,
    }
    finish_output(out, summary, [path])
    log(
        f"rollouts: {done} episodes in {summary['seconds']} s, teacher final_score {summary['teacher_final_score']:.3f}"
    )
    return path


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
