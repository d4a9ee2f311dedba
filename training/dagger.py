"""Stage 3b (optional): DAgger relabelling of the student's own weeks by the teacher.

A v1 student copies its previous belief (the teacher's changes little from step to step), so
at inference it keeps whatever it guessed on the first day (docs/training.md). Teacher weeks
never show it a wrong belief of its own to correct. Here the student plays weeks (its GGUF
under llama.cpp, or a checkpoint under PyTorch), and the Bayesian teacher, shadowing the same
observations, writes its own answer (action and belief) for every step. Stage 2 turns each
such week into one sequence that shows the student's answers as context and trains on the
teacher's, each inserted just before the student's and hidden from every later token
(``training.batches.hidden_belief_layout``): the student learns to answer like the teacher after
a history that holds its own mistakes.

Output: ``dagger.jsonl``, rollout records (``training.weeks``) whose ``actions`` and
``beliefs`` are the teacher's labels, plus ``student_actions`` and ``student_beliefs`` (what
was played and shown) and ``student_grade``.

    python -m training.dagger --student runs/medium/export/student-q8_0.gguf --episodes 300 --out runs/manual/dagger
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training.checkpoints import checkpoint_prompt_format, load_student, write_gguf
from training.common import (
    Progress,
    finish_output,
    help_field,
    log,
    no_progress,
    parse_args,
    prepare_output,
    seed_everything,
    silence_llama_cpp,
)
from training.weeks import FORMAT, observation_record, teacher_policy, write_weeks

DAGGER_FORMAT = "rhythm-dagger/1"


@dataclass
class Args:
    """DAgger: the student plays, the teacher labels."""

    student: str = help_field(
        "runs/manual/export/student-q8_0.gguf", "the student: a GGUF file or a checkpoint folder"
    )
    out: str = help_field("runs/manual/dagger", "output folder (dagger.jsonl)")
    episodes: int = help_field(300, "weeks the student plays")
    seed_start: int = help_field(
        4_000_000, "first episode seed (disjoint from rollouts, person and evaluation seeds)"
    )
    condition: str = help_field("in-dist", "profile distribution")
    workers: int = help_field(2, "worker processes")
    seed: int = help_field(0, "global seed")


def _student(path: str):
    p = Path(path)
    if p.suffix == ".gguf":
        from agent.lab.llm_policy import LLMPolicy
        from agent.runtime import LlamaCppModel

        silence_llama_cpp()
        return LLMPolicy(LlamaCppModel(p, n_ctx=2048, n_threads=1), form="compact", max_tokens=24)
    from training.student import TorchStudent

    return TorchStudent(p, threads=1)


def relabel_week(student, teacher, env, seed: int, condition: str) -> dict[str, Any]:
    """One week played by ``student``, every step labelled by ``teacher`` (same observations)."""
    obs, info = env.reset(seed=int(seed))
    student.reset(int(seed))
    teacher.reset(int(seed))
    observations = [observation_record(obs)]
    labels_a, labels_b, played_a, played_b = [], [], [], []
    terminated = False
    while not terminated:
        ta, tb = teacher.act(obs)
        sa, sb = student.act(obs)
        labels_a.append(int(ta))
        labels_b.append([round(float(x), 4) for x in np.asarray(tb).reshape(-1)])
        played_a.append(int(sa))
        played_b.append(None if sb is None else [round(float(x), 4) for x in np.asarray(sb)])
        step = int(sa) if sb is None else {"action": int(sa), "belief": np.asarray(sb, float)}
        obs, _, terminated, _, info = env.step(step)
        observations.append(observation_record(obs))
    return {
        "format": FORMAT,
        "dagger": DAGGER_FORMAT,
        "seed": int(seed),
        "condition": condition,
        "teacher": "bayes",
        "observations": observations,
        "actions": labels_a,
        "beliefs": labels_b,
        "student_actions": played_a,
        "student_beliefs": played_b,
        "belief_truth": [float(x) for x in info["belief_truth"]],
        "profile": info["profile"],
        "student_grade": env.unwrapped.grade().to_dict(),
    }


def _worker(job: tuple[list[int], str, str]) -> list[str]:
    from simulator.env import RhythmEnv

    seeds, student_path, condition = job
    student, teacher = _student(student_path), teacher_policy("bayes")
    env = RhythmEnv(condition=condition)
    return [
        json.dumps(relabel_week(student, teacher, env, s, condition), separators=(",", ":"))
        for s in seeds
    ]


def student_gguf(checkpoint: Path, out: Path) -> Path:
    """An f32 GGUF of a checkpoint folder, so the student plays under llama.cpp (about 3x
    faster than PyTorch; the export stage's parity check shows they answer alike)."""
    model = load_student(checkpoint, "")
    return write_gguf(
        model,
        checkpoint / "tokenizer.json",
        out / "student-f32.gguf",
        checkpoint_prompt_format(checkpoint),
    )


def main(args: Args, progress: Progress = no_progress) -> Path:
    seed_everything(args.seed)
    student = Path(args.student)
    inputs = [student] if student.is_file() else [student / "model.safetensors"]
    out = prepare_output(args.out, "dagger", args, inputs)
    t0 = time.time()
    if not student.is_file():
        student = student_gguf(student, out)
    seeds = list(range(args.seed_start, args.seed_start + args.episodes))
    chunks = [seeds[i : i + 10] for i in range(0, len(seeds), 10)]
    path = out / "dagger.jsonl"
    jobs = [(c, str(student), args.condition) for c in chunks]
    done, scores, maes = write_weeks(
        path,
        _worker,
        jobs,
        args.workers,
        "student_grade",
        lambda n: progress("dagger", n, len(seeds)),
    )
    summary = {
        "episodes": done,
        "student_final_score": float(np.mean(scores)),
        "student_belief_mae": float(np.mean(maes)) if maes else None,
        "seconds": round(time.time() - t0, 1),
    }
    finish_output(out, summary, [path])
    log(
        f"dagger: {done} student weeks relabelled by the teacher in {summary['seconds']:.0f} s "
        f"(student final_score {summary['student_final_score']:.3f}, belief_mae {summary['student_belief_mae']})"
    )
    return path


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
