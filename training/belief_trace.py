"""Diagnosis: how the student's belief moves over the week, against the teacher's.

Reads the weeks of ``training.dagger`` (the student plays; the Bayesian teacher, shadowing
the same observations, writes its own belief every step) and measures, step by step and per
dimension (social, morning, work), the absolute error to the true belief of the student's
belief and of the teacher's, next to the best constant guess (the median truth of these
weeks). Only the last belief counts in the grade (spec 7); the trace shows where it comes
from: a student that copies its earlier answers stops moving after the first days.

Outputs: ``trace.csv`` (one row per step), ``trace.png`` (the errors over the week),
``summary.json``.

    python -m training.dagger --student agent/lab/models/student-q8_0.gguf --episodes 60 --out runs/diag/weeks
    python -m training.belief_trace --weeks runs/diag/weeks/dagger.jsonl --out runs/diag/trace
"""

from __future__ import annotations

import csv
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training.common import finish_output, help_field, log, parse_args, prepare_output

DIMENSIONS = ("social", "morning", "work")


@dataclass
class Args:
    """Belief trace of a student against the teacher."""

    weeks: str = help_field("runs/manual/dagger/dagger.jsonl", "weeks of training.dagger")
    out: str = help_field("runs/manual/trace", "output folder (trace.csv, trace.png)")


def trace(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-step mean absolute errors to the truth, shape (steps, 3), of the student's and the
    teacher's beliefs; the constant guess's error (3,); the student's mean step-to-step
    change (steps - 1,). Steps where the student emitted no belief are left out of its mean."""
    if not records:
        raise ValueError("no weeks to trace")
    truth = np.array([r["belief_truth"] for r in records], dtype=np.float64)
    teacher = np.array([r["beliefs"] for r in records], dtype=np.float64)
    student = np.array(
        [[np.full(3, np.nan) if b is None else b for b in r["student_beliefs"]] for r in records],
        dtype=np.float64,
    )
    student_err = np.abs(student - truth[:, None, :])
    with warnings.catch_warnings():  # a step where no week has a student belief stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        student_mean = np.nanmean(student_err, axis=0)
        change = np.nanmean(np.abs(np.diff(student, axis=1)), axis=(0, 2))
    return {
        "weeks": len(records),
        "student": student_mean,
        "teacher": np.abs(teacher - truth[:, None, :]).mean(axis=0),
        "constant": np.abs(truth - np.median(truth, axis=0)).mean(axis=0),
        "student_change": change,
    }


def plot(t: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(t["student"].shape[0])
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), sharey=True)
    for k, (ax, name) in enumerate(zip(axes, DIMENSIONS, strict=True)):
        ax.plot(steps, t["student"][:, k], label="student")
        ax.plot(steps, t["teacher"][:, k], label="teacher (same observations)")
        ax.axhline(t["constant"][k], color="grey", linestyle="--", label="constant guess")
        ax.set_title(name)
        ax.set_xlabel("step of the week")
    axes[0].set_ylabel("|belief - truth|")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"belief error over the week ({t['weeks']} weeks)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(args: Args) -> Path:
    weeks = Path(args.weeks)
    out = prepare_output(args.out, "belief_trace", args, [weeks])
    records = [json.loads(line) for line in weeks.read_text().splitlines() if line.strip()]
    t = trace(records)
    with (out / "trace.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["step"]
            + [f"{who}_{d}" for who in ("student", "teacher") for d in DIMENSIONS]
            + ["student_change"]
        )
        for s in range(t["student"].shape[0]):
            change = t["student_change"][s - 1] if s else 0.0
            w.writerow(
                [s] + [f"{x:.4f}" for x in (*t["student"][s], *t["teacher"][s])] + [f"{change:.4f}"]
            )
    plot(t, out / "trace.png")
    summary = {
        "weeks": t["weeks"],
        "last_step": {
            "student": dict(zip(DIMENSIONS, np.round(t["student"][-1], 4).tolist(), strict=True)),
            "teacher": dict(zip(DIMENSIONS, np.round(t["teacher"][-1], 4).tolist(), strict=True)),
            "constant": dict(zip(DIMENSIONS, np.round(t["constant"], 4).tolist(), strict=True)),
        },
        "student_belief_mae": float(t["student"][-1].mean()),
        "teacher_belief_mae": float(t["teacher"][-1].mean()),
        "constant_belief_mae": float(t["constant"].mean()),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    finish_output(out, summary, [out / "trace.csv", out / "trace.png"])
    for who in ("student", "teacher", "constant"):
        errs = summary["last_step"][who]
        log(f"belief_trace {who}: " + ", ".join(f"{d} {e:.3f}" for d, e in errs.items()))
    return out


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
