"""Refining the student on one person's answers (issue 20 item 8), measured in the simulator.

    nice .venv/bin/python benchmarks/refine.py                       # 10 people
    nice .venv/bin/python benchmarks/refine.py --people 2 --model PATH.gguf --json

For each simulated person (in-dist profile of seed s): week 1 is played by the student in
feedback mode (``--observe``, default noisy), the person answering every recommendation; a
Bayesian belief reads that week (meters and answers), :func:`agent.hindsight.answer_targets`
turns the 28 answers into targets, and :func:`training.answers.refine_gguf` refines the
student on them (the same code ``rhythm train refine`` runs on stored answers). Week 2 (new
seed, the same person) is then played by the base and by the refined student. Prints
week-2 final_score, acceptance and belief_mae, base against refined, per person and on
average (paired differences with a 95% interval).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402
from rich.table import Table  # noqa: E402

from agent.hindsight import Answered, answer_targets  # noqa: E402
from agent.lab.student_policy import StudentPolicy  # noqa: E402
from agent.prompting import format_output  # noqa: E402
from agent.teacher import BayesAgent  # noqa: E402
from simulator.env import RhythmEnv  # noqa: E402
from simulator.profiles import sample_profile  # noqa: E402
from training.answers import Example, RefineSettings, refine_gguf  # noqa: E402

WEEK2_OFFSET = 500_000


def play_week(policy: StudentPolicy, profile, seed: int, observe: str) -> dict[str, Any]:
    """One feedback-mode week: the grade, acceptance, and per step the prompt the student saw,
    the meters it saw, the slot, its recommendation and the answer."""
    env = RhythmEnv(profile=profile, feedback=True, observe=observe)
    obs, _ = env.reset(seed=seed)
    policy.configure(True, observe)
    policy.reset(seed)
    steps, observations = [], [obs]
    done = False
    info: dict[str, Any] = {}
    while not done:
        action, belief = policy.act(obs)
        steps.append({"prompt": policy.llm.last_prompt, "meters": np.asarray(obs["meters"], dtype=float),
                      "slot": int(obs["slot"]), "action": int(action)})
        obs, _, done, _, info = env.step({"action": action, "belief": belief})
        observations.append(obs)
    for s, ans in zip(steps, info["answers"], strict=True):
        s["accepted"] = bool(ans["accepted"])
    g = env.grade().to_dict()
    return {"final_score": g["final_score"], "belief_mae": g["belief_mae"],
            "acceptance": float(np.mean([a["accepted"] for a in info["answers"]])),
            "steps": steps, "observations": observations}


def hindsight_examples(week: dict[str, Any], observe: str, seed: int) -> tuple[list[Example], int]:
    """The week's answers as training examples (the belief has read the whole week)."""
    agent = BayesAgent()
    agent.configure(True, observe)
    agent.reset(seed)
    bs = agent.belief_state
    for o in week["observations"]:
        bs.update_from_observation(o)
    answered = [Answered(s["meters"], s["slot"], s["action"], s["accepted"]) for s in week["steps"]]
    targets = answer_targets(bs, answered)
    examples = [Example(s["prompt"], format_output(t.action, t.belief)) for s, t in zip(week["steps"], targets, strict=True)]
    return examples, sum(t.changed for t in targets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--people", type=int, default=10)
    ap.add_argument("--seed-start", type=int, default=7000)
    ap.add_argument("--model", default=str(_HERE.parent / "agent" / "lab" / "models" / "student-q8_0.gguf"))
    ap.add_argument("--observe", default="noisy", choices=["clean", "noisy", "answers-only"])
    ap.add_argument("--steps", type=int, default=RefineSettings.steps)
    ap.add_argument("--lr", type=float, default=RefineSettings.lr)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    console = Console(stderr=True)
    base = StudentPolicy.from_gguf(args.model)
    rows = []
    t0 = time.time()
    with Progress(console=console) as bar, tempfile.TemporaryDirectory() as tmp:
        task = bar.add_task("people", total=args.people)
        for i in range(args.people):
            seed = args.seed_start + i
            profile = sample_profile(seed, "in-dist")
            week1 = play_week(base, profile, seed, args.observe)
            examples, changed = hindsight_examples(week1, args.observe, seed)
            rep = refine_gguf(Path(args.model), examples, Path(tmp) / f"p{i}",
                              RefineSettings(steps=args.steps, lr=args.lr, seed=seed))
            refined = StudentPolicy.from_gguf(rep["model"])
            b2 = play_week(base, profile, seed + WEEK2_OFFSET, args.observe)
            r2 = play_week(refined, profile, seed + WEEK2_OFFSET, args.observe)
            rows.append({"seed": seed, "week1_final_score": week1["final_score"],
                         "week1_acceptance": week1["acceptance"], "targets_changed": changed,
                         "loss_before": rep["answer_loss_before"], "loss_after": rep["answer_loss_after"],
                         "refine_seconds": rep["seconds"],
                         **{f"base_{k}": b2[k] for k in ("final_score", "acceptance", "belief_mae")},
                         **{f"refined_{k}": r2[k] for k in ("final_score", "acceptance", "belief_mae")}})
            bar.advance(task)
    summary: dict[str, Any] = {"people": len(rows), "observe": args.observe, "model": Path(args.model).name,
                               "steps": args.steps, "seconds": round(time.time() - t0, 1)}
    for k in ("final_score", "acceptance", "belief_mae"):
        d = np.array([r[f"refined_{k}"] - r[f"base_{k}"] for r in rows], dtype=float)
        half = 1.96 * d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
        summary[k] = {"base": float(np.mean([r[f"base_{k}"] for r in rows])),
                      "refined": float(np.mean([r[f"refined_{k}"] for r in rows])),
                      "diff": float(d.mean()), "diff_ci95": float(half)}
    if args.json:
        print(json.dumps({"summary": summary, "people": rows}, indent=2))
        return
    out = Console()
    t = Table(title=f"Week 2 after refining on week 1's answers ({args.observe}, {len(rows)} people)")
    for col in ("seed", "changed targets", "loss", "score base", "score refined", "accept base", "accept refined"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(str(r["seed"]), str(r["targets_changed"]), f"{r['loss_before']:.2f}->{r['loss_after']:.2f}",
                  f"{r['base_final_score']:.3f}", f"{r['refined_final_score']:.3f}",
                  f"{r['base_acceptance']:.2f}", f"{r['refined_acceptance']:.2f}")
    out.print(t)
    for k in ("final_score", "acceptance", "belief_mae"):
        s = summary[k]
        out.print(f"{k}: base {s['base']:.3f}, refined {s['refined']:.3f}, "
                  f"difference {s['diff']:+.3f} ± {s['diff_ci95']:.3f}")
    out.print(f"{summary['seconds']:.0f} s")


if __name__ == "__main__":
    main()
