"""Stage 6: the three-condition table (in-distribution, OOD, discrete-3) for the baselines,
the Bayesian teacher and each student, a plot of final scores, and ``docs/results.md``.

Students are given as ``name=path``: a checkpoint folder runs the PyTorch model
(training/student.py), a ``.gguf`` file runs under llama.cpp through
:class:`agent.lab.llm_policy.LLMPolicy` (one thread, greedy, grammar-constrained, the KV cache
reused across the steps of a week). Time per decision is measured for every student.
The markdown file is written by this script, never by hand.

    python -m training.evaluate --students pytorch=runs/x/sft/checkpoint q8_0=runs/x/export/student-q8_0.gguf \
        --out runs/x/eval --results-md docs/results.md
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.prompting import WEEK_FORMATS
from simulator import spec
from simulator.evaluate import PUBLISHED, PUBLISHED_BELIEF_MAE, EvalResult, evaluate
from training.common import (
    Progress,
    finish_output,
    git_commit,
    help_field,
    log,
    no_progress,
    parse_args,
    prepare_output,
    quiet_libraries,
    seed_everything,
    silence_llama_cpp,
)

CONDITION_TITLES = {"in-dist": "in-dist", "ood": "OOD", "discrete": "discrete-3"}


@dataclass
class Args:
    """Three-condition evaluation and docs/results.md."""

    students: list[str] = help_field([], "students as name=path (checkpoint folder or .gguf file)")
    baselines: list[str] = help_field(
        ["random", "heuristic", "bayes"], "registered policies to evaluate beside the students"
    )
    episodes: int = help_field(
        0,
        "episodes per condition (per named profile for discrete); 0 = the protocol's 100 / 50 / 5",
    )
    out: str = help_field("runs/manual/eval", "output folder (results.json, final_scores.png)")
    results_md: str = help_field(
        "", "write the markdown report here (e.g. docs/results.md); empty = out/results.md"
    )
    title: str = help_field("Student evaluation", "heading of the markdown report")
    note: str = help_field("", "a paragraph under the heading (what was trained, budgets)")
    n_ctx: int = help_field(2048, "llama.cpp context for GGUF students")
    seed: int = help_field(0, "seed")


class TimedModel:
    """Wraps a :class:`agent.runtime.Model` and times its ``complete`` calls."""

    def __init__(self, model) -> None:
        self.model = model
        self.calls = 0
        self.seconds = 0.0

    @property
    def prompt_format(self):
        return getattr(self.model, "prompt_format", None)

    @property
    def supports_belief_median(self):
        return getattr(self.model, "supports_belief_median", False)

    def complete(self, prompt, *, grammar=None, max_tokens=16, **options):
        t0 = time.perf_counter()
        try:
            return self.model.complete(prompt, grammar=grammar, max_tokens=max_tokens, **options)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1


def make_student(path: str, n_ctx: int):
    """``(policy, stats())`` for a checkpoint folder or a GGUF file."""
    p = Path(path)
    if p.suffix == ".gguf":
        from agent.lab.llm_policy import LLMPolicy
        from agent.runtime import LlamaCppModel

        silence_llama_cpp()
        timed = TimedModel(LlamaCppModel(p, n_ctx=n_ctx, n_threads=1))
        if timed.prompt_format in WEEK_FORMATS:  # it reads the teacher's filter: the student policy runs it
            from agent.lab.student_policy import StudentPolicy

            player = StudentPolicy(timed)
            policy = player.llm
        else:
            player = policy = LLMPolicy(timed, form="compact", max_tokens=24)
        return player, lambda: {
            "backend": "llama.cpp",
            "bytes": p.stat().st_size,
            "ms_per_decision": 1000 * timed.seconds / max(1, timed.calls),
            "decisions": timed.calls,
            "invalid_outputs": policy.invalid_outputs,
        }
    from training.student import TorchStudent

    student = TorchStudent(p, threads=1)
    size = (p / "model.safetensors").stat().st_size if (p / "model.safetensors").exists() else None
    return student, lambda: {
        "backend": "pytorch",
        "bytes": size,
        "ms_per_decision": student.ms_per_decision,
        "decisions": student.decisions,
        "invalid_outputs": student.invalid_outputs,
    }


def _fmt(x: float | None, d: int = 3) -> str:
    return "-" if x is None else f"{x:.{d}f}"


def _half(r: dict[str, Any]) -> float:
    lo, hi = r["final_score_ci95"]
    return (hi - lo) / 2


def markdown(
    results: dict[str, dict[str, Any]],
    extra: dict[str, dict[str, Any]],
    args: Args,
    command: str,
    git: dict[str, Any] | None = None,
) -> str:
    """The report; ``git`` is the tree's state when the evaluation started (the report's own
    plot, written just before, would make it read dirty)."""
    git = git or git_commit()
    conds = spec.CONDITIONS
    lines = [
        f"# {args.title}",
        "",
        f"_Written by `training/evaluate.py` (do not edit by hand) on {time.strftime('%Y-%m-%d %H:%M')}, "
        f"commit `{(git['commit'] or '?')[:12]}`{' (dirty tree)' if git['dirty'] else ''}._",
        "",
    ]
    if args.note:
        lines += [args.note, ""]
    lines += [f"Command: `{command}`", ""]
    lines += [
        "final_score: mean ± 95% half-interval over episodes; belief_mae: mean over episodes "
        "(lower is better; '-' = no belief emitted).",
        "",
    ]
    head = (
        "| policy | "
        + " | ".join(CONDITION_TITLES[c] for c in conds)
        + " | "
        + " | ".join(f"belief_mae {CONDITION_TITLES[c]}" for c in conds)
        + " | ms/decision | file |"
    )
    lines += [head, "|" + "---|" * (2 + 2 * len(conds) + 1)]
    for name, by_cond in results.items():
        e = extra.get(name, {})
        size = e.get("bytes")
        lines.append(
            f"| {name} | "
            + " | ".join(
                f"{by_cond[c]['final_score']:.3f} ± {_half(by_cond[c]):.3f}" for c in conds
            )
            + " | "
            + " | ".join(_fmt(by_cond[c]["belief_mae"]) for c in conds)
            + f" | {_fmt(e.get('ms_per_decision'), 1)} | {'' if size is None else f'{size / 1e6:.2f} MB'} |"
        )
    for name, figures in PUBLISHED.items():
        mae = PUBLISHED_BELIEF_MAE.get(name)
        lines.append(
            f"| {name} (published) | "
            + " | ".join(_fmt(figures[c]) for c in conds)
            + f" | {_fmt(mae)} | - | - | | |"
        )
    lines += [
        "",
        f"Episodes: {results[next(iter(results))]['in-dist']['episodes']} in-dist, "
        f"{results[next(iter(results))]['ood']['episodes']} OOD, "
        f"{results[next(iter(results))]['discrete']['episodes']} discrete-3.",
        "",
    ]
    if extra:
        lines += [
            "Students (one thread; ms per decision: the model call under llama.cpp, rendering + decoding for PyTorch):",
            "",
        ]
        lines += [
            "| student | backend | decisions | invalid outputs | ms/decision |",
            "|---|---|---|---|---|",
        ]
        for name, e in extra.items():
            lines.append(
                f"| {name} | {e['backend']} | {e['decisions']} | {e['invalid_outputs']} | {e['ms_per_decision']:.1f} |"
            )
        lines.append("")
    lines += ["![final scores](final_scores.png)", ""]
    return "\n".join(lines)


def plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(results)
    conds = spec.CONDITIONS
    x = np.arange(len(conds))
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, n in enumerate(names):
        means = [results[n][c]["final_score"] for c in conds]
        errs = [_half(results[n][c]) for c in conds]
        ax.bar(x + i * width - 0.4 + width / 2, means, width, yerr=errs, label=n, capsize=2)
    for c_i, c in enumerate(conds):
        for label, style in (("student (distilled 3B)", ":"), ("teacher (hosted LLM)", "--")):
            v = PUBLISHED[label][c]
            if v is not None:
                ax.hlines(v, c_i - 0.45, c_i + 0.45, colors="k", linestyles=style, linewidth=1)
    ax.set_xticks(x, [CONDITION_TITLES[c] for c in conds])
    ax.set_ylabel("final_score")
    ax.set_ylim(0, 1)
    ax.set_title(
        "final score by condition (dashed: published teacher, dotted: published 3B student)"
    )
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def keep_sections(path: Path, generated: str) -> str:
    """``generated`` followed by the ``## `` sections of the file already at ``path`` (other
    measurements other scripts write there, e.g. benchmarks/calendar_weeks.py): this script owns
    only the part before the first ``## `` heading."""
    if not path.exists():
        return generated
    lines = path.read_text().splitlines()
    i = next((k for k, line in enumerate(lines) if line.startswith("## ")), None)
    if i is None:
        return generated
    return generated.rstrip("\n") + "\n\n" + "\n".join(lines[i:]).rstrip("\n") + "\n"


def main(args: Args, progress: Progress = no_progress, command: str = "") -> dict[str, Any]:
    seed_everything(args.seed)
    quiet_libraries()
    from agent.lab.policies import register_agent_policies

    register_agent_policies()
    git = git_commit()
    out = prepare_output(args.out, "evaluate", args)
    episodes = args.episodes or None
    entries: list[tuple[str, Any, Any]] = [(b, b, None) for b in args.baselines]
    for s in args.students:
        name, _, path = s.partition("=")
        entries.append((f"student {name}", path, "student"))
    results: dict[str, dict[str, Any]] = {}
    extra: dict[str, dict[str, Any]] = {}
    total = len(entries) * len(spec.CONDITIONS)
    done = 0
    for name, what, kind in entries:
        t0 = time.time()
        results[name] = {}
        if kind == "student":
            policy, stats = make_student(what, args.n_ctx)
        for c in spec.CONDITIONS:
            pol = policy if kind == "student" else what
            r: EvalResult = evaluate(pol, c, episodes=episodes)
            results[name][c] = r.to_dict()
            done += 1
            progress("evaluate", done, total)
        if kind == "student":
            extra[name] = {**stats(), "path": what}
        log(
            f"evaluate {name}: "
            + ", ".join(f"{c} {results[name][c]['final_score']:.3f}" for c in spec.CONDITIONS)
            + f" belief_mae {_fmt(results[name]['in-dist']['belief_mae'])} ({time.time() - t0:.0f} s)"
        )
    md_path = Path(args.results_md) if args.results_md else out / "results.md"
    md_path.parent.mkdir(parents=True, exist_ok=True)
    plot(results, md_path.parent / "final_scores.png")
    if md_path.parent != out:
        plot(results, out / "final_scores.png")
    cmd = command or "python -m training.evaluate " + " ".join(
        [f"--students {' '.join(args.students)}"] if args.students else []
    ) + (f" --episodes {args.episodes}" if args.episodes else "")
    md_path.write_text(keep_sections(md_path, markdown(results, extra, args, cmd, git)))
    report = {"results": results, "students": extra, "episodes": args.episodes or "protocol"}
    (out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    finish_output(
        out,
        {n: {c: r[c]["final_score"] for c in r} for n, r in results.items()},
        [out / "results.json", md_path],
    )
    return report


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
