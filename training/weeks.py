"""Simulator weeks as the stages keep them: the rollout record format, one observation as a
record stores it (and a shaped week's view observation, there and back), the policy and the
person that play, and JSONL files of weeks (written by units on a local process pool or a
Ray cluster, resumably: training/executors.py; read back with a format check).

Every line of a weeks file is one episode (format ``rhythm-rollouts/1``). Written by
training/rollouts.py (teacher weeks) and training/dagger.py (student weeks the teacher
labels); read by training/dataset.py and training/export.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from training.executors import Executor

FORMAT = "rhythm-rollouts/1"
#: Weeks shaped like the product's (training/realshape.py): the prompt's view of every
#: observation (NaN as null, unknown actions), the week's context and the teacher's answer
#: at every step that has one.
SHAPED_FORMAT = "rhythm-rollouts/2"
FORMATS = (FORMAT, SHAPED_FORMAT)
#: Observation keys kept per step (what agent.prompting.render_compact reads, plus deltas).
OBS_KEYS = (
    "t",
    "slot",
    "meters",
    "deltas",
    "anomalies",
    "last_action",
    "last_reward",
    "active_event",
)
DECIMALS = 6


def teacher_policy(name: str):
    """A registered policy by name (``bayes``, ``heuristic``, ...), the agent's included."""
    from agent.lab.policies import register_agent_policies
    from simulator.policies import get_policy

    register_agent_policies()
    return get_policy(name)


def resolve_profile(spec_text: str):
    """``''`` -> None; a named profile; ``seed:N`` -> the in-distribution profile of seed N."""
    if not spec_text:
        return None
    from simulator.profiles import Profile, named_profile, sample_profile

    if spec_text.startswith("seed:"):
        return sample_profile(int(spec_text[5:]), "in-dist")
    p = named_profile(spec_text)
    assert isinstance(p, Profile)
    return p


def observation_record(o: dict[str, Any]) -> dict[str, Any]:
    """An env observation as a weeks record stores it: the :data:`OBS_KEYS`, integers as
    ints, the rest as lists of floats rounded to :data:`DECIMALS`."""
    out = {}
    for k in OBS_KEYS:
        v = np.asarray(o[k]).reshape(-1)
        out[k] = (
            int(v[0])
            if k in ("t", "slot", "last_action", "active_event")
            else [round(float(x), DECIMALS) for x in v]
        )
    out["last_reward"] = out["last_reward"][0]
    return out


def jsonable(obs: dict[str, Any], digits: int | None = 6) -> dict[str, Any]:
    """A view observation as a record keeps it (the keys the prompt reads; NaN as null;
    ``digits=None``: exact, so the record renders as the original does)."""
    def num(x: float) -> float | None:
        return (float(x) if digits is None else round(float(x), digits)) if np.isfinite(x) else None

    return {
        "t": int(obs["t"]),
        "meters": [num(x) for x in np.asarray(obs["meters"], dtype=np.float64).reshape(-1)],
        "anomalies": [num(x) for x in np.asarray(obs["anomalies"], dtype=np.float64).reshape(-1)],
        "last_action": int(np.asarray(obs["last_action"]).reshape(-1)[0]),
        "last_reward": num(float(np.asarray(obs["last_reward"], dtype=np.float64).reshape(-1)[0])),
        "active_event": int(np.asarray(obs.get("active_event", 0)).reshape(-1)[0]),
    }


def view_from_record(rec: dict[str, Any]) -> dict[str, Any]:
    """A stored view observation back as the renderer reads it (null as NaN)."""
    def arr(v) -> np.ndarray:
        return np.array([np.nan if x is None else x for x in v], dtype=np.float64)

    r = rec["last_reward"]
    return {
        "t": rec["t"],
        "meters": arr(rec["meters"]),
        "anomalies": arr(rec["anomalies"]),
        "last_action": rec["last_action"],
        "last_reward": np.array([np.nan if r is None else r]),
        "active_event": rec["active_event"],
    }


def write_weeks(
    path: Path,
    worker: Callable[[Any], list[str]],
    jobs: list,
    workers: int,
    grade_key: str,
    progress: Callable[[int], None],
    executor: Executor | None = None,
) -> tuple[int, list[float], list[float]]:
    """Run ``worker`` over ``jobs`` on ``executor`` (default: the local pool of ``workers``
    processes) and write its JSONL lines to ``path`` in job order, so the file is the same
    wherever the jobs ran; resumable (training.executors.unit_lines). ``progress(weeks
    done)``; returns ``(weeks, final scores, belief_maes)`` read from each record's
    ``grade_key``."""
    from training.executors import LocalPool, unit_lines

    done, scores, maes = 0, [], []

    def finished(n: int) -> None:
        nonlocal done
        done += n
        progress(done)

    for line in unit_lines(path, worker, jobs, executor or LocalPool(workers), finished):
        g = json.loads(line)[grade_key]
        scores.append(g["final_score"])
        if g["belief_mae"] is not None:
            maes.append(g["belief_mae"])
    return done, scores, maes


def read_rollouts(path: str | Path) -> Iterator[dict[str, Any]]:
    """Iterate over the episode records of a weeks JSONL file (checks the format)."""
    with open(path) as f:
        for i, line in enumerate(f):
            rec = json.loads(line)
            if rec.get("format") not in FORMATS:
                raise ValueError(
                    f"{path}:{i + 1}: expected format {' or '.join(FORMATS)}, got {rec.get('format')!r}"
                )
            yield rec


def shaped(rec: dict[str, Any]) -> dict[str, Any]:
    """A week in the ``rhythm-rollouts/2`` layout: shaped weeks as they are, a teacher week
    of ``rhythm-rollouts/1`` as a clean one (every observation known, every step a target)."""
    if rec.get("format") == SHAPED_FORMAT:
        return rec
    if "student_actions" in rec:
        raise ValueError("DAgger weeks have no v4 layout")
    return {
        **rec,
        "format": SHAPED_FORMAT,
        "views": rec["observations"],
        "context": {"events": [], "feedback": [], "observe": "clean"},
        "answers": [
            {"action": int(a), "belief": b} for a, b in zip(rec["actions"], rec["beliefs"], strict=True)
        ],
    }


def filter_context(rec: dict[str, Any]) -> dict[int, list[float]]:
    """A shaped week's filter beliefs as the v4 context's ``filters`` (step -> six numbers;
    the record's ``filters`` start at its first view's step)."""
    if rec.get("filters") is None:
        raise ValueError(f"week {rec.get('seed')} has no filter beliefs (made before prompt format v4)")
    t0 = int(rec["views"][0]["t"])
    return {t0 + i: f for i, f in enumerate(rec["filters"])}


def week_context(rec: dict[str, Any]) -> dict[str, Any]:
    """A shaped week's v4 prompt context: its fixed slots, answers and observation condition,
    and the filter's beliefs."""
    return {**rec["context"], "filters": filter_context(rec)}


def week_prompt(rec: dict[str, Any], k: int, fmt: str) -> tuple[str, int | None]:
    """The prompt for the ``k``-th decision of a week record (0 = its first step) in format
    ``fmt``, and the teacher's action there (None: no target, a fixed slot)."""
    from agent.prompting import FORMAT_V4, check_prompt_format, render_compact

    if check_prompt_format(fmt) == FORMAT_V4:
        w = shaped(rec)
        views = [view_from_record(v) for v in w["views"][: k + 1]]
        ans = w["answers"][k]
        return render_compact(views, week_context(w), fmt=fmt), None if ans is None else int(ans["action"])
    beliefs = [None if b is None else tuple(b) for b in rec["beliefs"][:k]]
    return render_compact(rec["observations"][: k + 1], None, beliefs, fmt=fmt), int(rec["actions"][k])
