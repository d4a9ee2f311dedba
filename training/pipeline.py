"""The whole distillation pipeline, stage after stage, under a budget preset.

    python -m training.pipeline --budget smoke --out runs/smoke      # every stage, ~1 min (CI)
    python -m training.pipeline --budget full --out runs/full --results-md docs/results.md --ship

Stages (one script each, all in training/): rollouts (Bayesian teacher) -> dataset and
tokenizer -> SFT of the student -> per-person LoRA adapter (rollouts and dataset of one
person, refine) -> export (GGUF, quantization, parity) -> evaluation (three conditions,
plot, markdown). Each stage writes its own folder under ``--out`` with args and manifest;
``pipeline.json`` sums them up. ``--ship`` (not with the smoke budget) copies the Q8_0
student and a generated model card into the package (``rhythm/models`` for a v4 student,
``agent/lab/models`` for a v1 one).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training import dagger, dataset, evaluate, export, reading_probe, refine, rollouts, sft
from training.batches import prompt_format_of
from training.checkpoints import checkpoint_prompt_format
from training.common import (
    REPO_ROOT,
    Progress,
    args_from,
    git_commit,
    help_field,
    log,
    no_progress,
    parse_args,
)

V4 = "rhythm v4"
#: Budget presets: overrides per stage (see each script's Args for the meaning). ``smoke``,
#: ``medium`` and ``full`` train the v4 student on weeks shaped like the product's (one SFT
#: stage from scratch with a prefix curriculum; v4 shows the teacher's filter before each
#: decision and no past beliefs, so there is
#: nothing to blind or copy; in medium and full a quarter of the weeks in the simulator's
#: feedback mode, which raised the student's feedback-mode scores (docs/training.md);
#: misspecified worlds' weeks did not help the student there, so they are left out and
#: ``--world-share`` adds them); the ``-v1`` presets are the earlier recipe (v1 prompt,
#: stale stretches, DAgger in smoke, the reading stage).
BUDGETS: dict[str, dict[str, dict[str, Any]]] = {
    "smoke": {
        "rollouts": {"episodes": 6, "workers": 1, "shaped": True, "product_share": 0.5},
        "dataset": {"vocab_size": 512, "val_fraction": 0.34, "prompt_format": V4},
        "sft": {
            "layers": 2,
            "hidden": 64,
            "ffn": 128,
            "heads": 2,
            "kv_heads": 2,
            "batch_size": 2,
            "steps": 8,
            "warmup": 2,
            "eval_every": 4,
            "minutes": 2.0,
            "bf16": False,
            "curriculum": [4, 28],
        },
        "person_rollouts": {"episodes": 2, "workers": 1, "profile": "seed:4242"},
        "refine": {"steps": 2, "batch_size": 1, "person": "seed:4242", "eval_episodes": 0},
        "export": {
            "quants": ["f16", "q8_0", "q4_0"],
            "parity_episodes": 1,
            "parity_steps": [0, 13, 27],
        },
        "evaluate": {"episodes": 1, "students": ["pytorch", "q8_0", "q4_0"]},
    },
    "medium": {
        "rollouts": {"episodes": 2000, "workers": 2, "shaped": True, "product_share": 0.6, "feedback_share": 0.25},
        "dataset": {"vocab_size": 1024, "prompt_format": V4},
        "sft": {
            "minutes": 45.0,
            "steps": 100_000,
            "warmup": 80,
            "eval_every": 300,
            "curriculum": [4, 10, 28, 28],
        },
        "person_rollouts": {"episodes": 12, "workers": 2, "profile": "seed:4242"},
        "refine": {"steps": 20, "minutes": 4.0, "person": "seed:4242", "eval_episodes": 5},
        "export": {"quants": ["f16", "q8_0", "q4_k_m"], "parity_episodes": 8},
        "evaluate": {"episodes": 0, "students": ["pytorch", "q8_0", "q4_k_m"]},
    },
    "full": {
        "rollouts": {"episodes": 4000, "workers": 2, "shaped": True, "product_share": 0.6, "feedback_share": 0.25},
        "dataset": {"vocab_size": 1024, "prompt_format": V4},
        "sft": {
            "minutes": 85.0,
            "steps": 100_000,
            "warmup": 100,
            "eval_every": 300,
            "curriculum": [4, 10, 28, 28, 28, 28],
        },
        "person_rollouts": {"episodes": 20, "workers": 2, "profile": "seed:4242"},
        "refine": {"steps": 30, "minutes": 5.0, "person": "seed:4242", "eval_episodes": 5},
        "export": {"quants": ["f16", "q8_0", "q4_k_m"], "parity_episodes": 16},
        "evaluate": {"episodes": 0, "students": ["pytorch", "q8_0", "q4_k_m"]},
    },
    "smoke-v1": {
        "rollouts": {"episodes": 6, "workers": 1},
        "dataset": {"vocab_size": 512, "val_fraction": 0.34, "stale_fraction": 0.5},
        "sft": {
            "layers": 2,
            "hidden": 64,
            "ffn": 128,
            "heads": 2,
            "kv_heads": 2,
            "batch_size": 2,
            "steps": 8,
            "warmup": 2,
            "eval_every": 4,
            "minutes": 2.0,
            "bf16": False,
            "correction_weight": 3.0,
        },
        "dagger": {"episodes": 2, "workers": 1},
        "read": {
            "batch_size": 2,
            "steps": 4,
            "warmup": 1,
            "eval_every": 2,
            "minutes": 1.0,
            "bf16": False,
            "lr": 3e-4,
            "blind_fraction": 1.0,
            "curriculum": [2, 28],
        },
        "probe": {"weeks": 2, "threads": 1},
        "dagger_sft": {
            "batch_size": 2,
            "steps": 4,
            "warmup": 1,
            "eval_every": 2,
            "minutes": 1.0,
            "bf16": False,
            "lr": 3e-4,
        },
        "person_rollouts": {"episodes": 2, "workers": 1, "profile": "seed:4242"},
        "refine": {"steps": 2, "batch_size": 1, "person": "seed:4242", "eval_episodes": 0},
        "export": {
            "quants": ["f16", "q8_0", "q4_0"],
            "parity_episodes": 1,
            "parity_steps": [0, 13, 27],
        },
        "evaluate": {"episodes": 1, "students": ["pytorch", "q8_0", "q4_0"]},
    },
    "medium-v1": {
        "rollouts": {"episodes": 1600, "workers": 2},
        "dataset": {"vocab_size": 1024, "stale_fraction": 0.5},
        "sft": {"minutes": 45.0, "steps": 2000, "warmup": 60, "correction_weight": 3.0},
        "read": {
            "minutes": 20.0,
            "steps": 100_000,
            "lr": 5e-4,
            "warmup": 30,
            "eval_every": 300,
            "blind_fraction": 1.0,
            "curriculum": [3, 6, 10, 16, 28],
            "correction_weight": 3.0,
        },
        "person_rollouts": {"episodes": 12, "workers": 2, "profile": "seed:4242"},
        "refine": {"steps": 20, "minutes": 4.0, "person": "seed:4242", "eval_episodes": 5},
        "export": {"quants": ["f16", "q8_0", "q4_k_m"], "parity_episodes": 8},
        "evaluate": {"episodes": 0, "students": ["pytorch", "q8_0", "q4_k_m"]},
    },
    "full-v1": {
        "rollouts": {"episodes": 3000, "workers": 2},
        "dataset": {"vocab_size": 1024, "stale_fraction": 0.5},
        "sft": {"minutes": 55.0, "steps": 2500, "warmup": 80, "correction_weight": 3.0},
        "read": {
            "minutes": 35.0,
            "steps": 100_000,
            "lr": 5e-4,
            "warmup": 30,
            "eval_every": 300,
            "blind_fraction": 1.0,
            "curriculum": [3, 6, 10, 16, 28, 28, 28],
            "correction_weight": 3.0,
        },
        "person_rollouts": {"episodes": 20, "workers": 2, "profile": "seed:4242"},
        "refine": {"steps": 30, "minutes": 5.0, "person": "seed:4242", "eval_episodes": 5},
        "export": {"quants": ["f16", "q8_0", "q4_k_m"], "parity_episodes": 16},
        "evaluate": {"episodes": 0, "students": ["pytorch", "q8_0", "q4_k_m"]},
    },
}
STAGES = (
    "rollouts",
    "dataset",
    "sft",
    "dagger",
    "dagger_dataset",
    "dagger_sft",
    "read",
    "probe",
    "refine",
    "export",
    "evaluate",
)


@dataclass
class Args:
    """The whole pipeline."""

    budget: str = help_field(
        "smoke", "budget preset: smoke, medium or full (v4); smoke-v1, medium-v1 or full-v1"
    )
    out: str = help_field("runs/smoke", "output root (one folder per stage)")
    results_md: str = help_field(
        "", "markdown report path (e.g. docs/results.md); empty = <out>/eval/results.md"
    )
    skip: list[str] = help_field(
        [], "stages to skip when their outputs exist already (e.g. rollouts)"
    )
    ship: bool = help_field(
        False,
        "copy the Q8_0 student and its model card into the package: a v4 student into "
        "rhythm/models, a v1 one into agent/lab/models (not for smoke)",
    )
    ship_dir: str = help_field("", "where --ship writes (empty: by the student's format, as --ship says)")
    seed: int = help_field(0, "seed for every stage")


def main(args: Args, progress: Progress = no_progress) -> dict[str, Any]:
    if args.budget not in BUDGETS:
        raise ValueError(f"unknown budget {args.budget!r}; expected one of {', '.join(BUDGETS)}")
    if args.ship and args.budget.startswith("smoke"):
        raise ValueError("a smoke-budget model is never shipped")
    b = BUDGETS[args.budget]
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    t_start = time.time()

    def stage(name: str, fn, a) -> Any:
        t0 = time.time()
        if name in args.skip:
            log(f"pipeline: skipping {name}")
            return None
        log(f"pipeline: {name} ...")
        result = fn(a, progress)
        times[name] = round(time.time() - t0, 1)
        return result

    seed = {"seed": args.seed}

    def more_sft(preset: dict[str, Any], init: Path, data: Path, out: Path) -> sft.Args:
        """Settings of an SFT stage that trains on from checkpoint ``init``."""
        over = {**preset, **seed, "init_from": str(init), "data": str(data), "out": str(out)}
        return args_from(sft.Args, over)

    roll_path = root / "rollouts" / "rollouts.jsonl"
    stage(
        "rollouts",
        rollouts.main,
        args_from(rollouts.Args, {**b["rollouts"], **seed, "out": str(root / "rollouts")}),
    )
    data_dir = root / "dataset"
    stage(
        "dataset",
        dataset.main,
        args_from(
            dataset.Args,
            {**b["dataset"], **seed, "rollouts": [str(roll_path)], "out": str(data_dir)},
        ),
    )
    ck = root / "sft" / "checkpoint"
    stage(
        "sft",
        sft.main,
        args_from(sft.Args, {**b["sft"], **seed, "data": str(data_dir), "out": str(root / "sft")}),
    )
    if "dagger" in b:
        # DAgger: the student plays, the teacher labels, the student trains on both kinds of week
        dag = root / "dagger"
        stage(
            "dagger",
            dagger.main,
            args_from(
                dagger.Args,
                {**b["dagger"], **seed, "student": str(ck), "out": str(dag / "weeks")},
            ),
        )
        stage(
            "dagger_dataset",
            dataset.main,
            args_from(
                dataset.Args,
                {
                    **b["dataset"],
                    **seed,
                    "rollouts": [str(roll_path), str(dag / "weeks" / "dagger.jsonl")],
                    "tokenizer": str(ck / "tokenizer.json"),
                    "out": str(dag / "dataset"),
                },
            ),
        )
        stage("dagger_sft", sft.main, more_sft(b["dagger_sft"], ck, dag / "dataset", dag / "sft"))
        ck, data_dir = dag / "sft" / "checkpoint", dag / "dataset"

    if "read" in b:
        # learning to read: the same weeks, every earlier belief replaced by another week's
        # (copying is useless), from the first 3 steps of each week up to whole weeks
        stage("read", sft.main, more_sft(b["read"], ck, root / "dataset", root / "read"))
        ck = root / "read" / "checkpoint"

    # does the student read the person, or copy the beliefs in its context? (v1 data only;
    # on the teacher's held-out weeks of stage 2, also after DAgger)
    if prompt_format_of(root / "dataset") == "rhythm v1":
        stage(
            "probe",
            reading_probe.main,
            args_from(
                reading_probe.Args,
                {
                    **b.get("probe", {}),
                    **seed,
                    "checkpoint": str(ck),
                    "data": str(root / "dataset"),
                    "out": str(root / "probe"),
                },
            ),
        )

    person = root / "person"
    stage(
        "person_rollouts",
        rollouts.main,
        args_from(
            rollouts.Args,
            {
                **b["person_rollouts"],
                **seed,
                "seed_start": 3_000_000,
                "out": str(person / "rollouts"),
            },
        ),
    )
    stage(
        "person_dataset",
        dataset.main,
        args_from(
            dataset.Args,
            {
                **seed,
                "rollouts": [str(person / "rollouts" / "rollouts.jsonl")],
                "out": str(person / "dataset"),
                "tokenizer": str(ck / "tokenizer.json"),
                "val_fraction": 0.25,
                "prompt_format": prompt_format_of(root / "dataset"),
            },
        ),
    )
    stage(
        "refine",
        refine.main,
        args_from(
            refine.Args,
            {
                **b["refine"],
                **seed,
                "checkpoint": str(ck),
                "data": str(person / "dataset"),
                "out": str(person / "lora"),
            },
        ),
    )

    exp = root / "export"
    parity = stage(
        "export",
        export.main,
        args_from(
            export.Args,
            {**b["export"], **seed, "checkpoint": str(ck), "data": str(data_dir), "out": str(exp)},
        ),
    )
    students = []
    for kind in b["evaluate"]["students"]:
        students.append(
            f"{kind}={ck}" if kind == "pytorch" else f"{kind}={exp / f'student-{kind}.gguf'}"
        )
    note = _note(root, args.budget)
    report = stage(
        "evaluate",
        evaluate.main,
        args_from(
            evaluate.Args,
            {
                "episodes": b["evaluate"]["episodes"],
                **seed,
                "students": students,
                "out": str(root / "eval"),
                "results_md": args.results_md,
                "title": f"Results: Bayesian teacher and distilled students ({args.budget} budget)",
                "note": note,
            },
        ),
    )
    summary = {
        "budget": args.budget,
        "git": git_commit(),
        "seconds": round(time.time() - t_start, 1),
        "stage_seconds": times,
        "parity": None
        if parity is None
        else {
            k: {
                "action_agreement": v["action_agreement"],
                "answer_agreement": v["answer_agreement"],
                "bytes": v["bytes"],
            }
            for k, v in parity["files"].items()
        },
        "results": None
        if report is None
        else {n: {c: r[c]["final_score"] for c in r} for n, r in report["results"].items()},
    }
    (root / "pipeline.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    if args.ship:
        ship(root, Path(args.ship_dir) if args.ship_dir else None, args)
    log(f"pipeline: done in {summary['seconds'] / 60:.1f} min")
    return summary


def final_checkpoint(root: Path) -> Path:
    """The checkpoint the run ends with: after the reading stage, or DAgger, when the budget
    has them."""
    for ck in (root / "read" / "checkpoint", root / "dagger" / "sft" / "checkpoint"):
        if ck.exists():
            return ck
    return root / "sft" / "checkpoint"


def _training_summary(root: Path) -> str:
    """Steps, tokens and minutes of each SFT stage the run went through."""
    parts = []
    for name, folder in (
        ("SFT from scratch", root / "sft"),
        ("DAgger SFT", root / "dagger" / "sft"),
        ("reading stage (blinded weeks, prefix curriculum)", root / "read"),
    ):
        try:
            ck = json.loads((folder / "checkpoint" / "checkpoint.json").read_text())
        except (OSError, ValueError):
            continue
        m = ck.get("metrics", {})
        parts.append(
            f"{name} {m.get('step')} steps, {m.get('tokens', 0):,} tokens in "
            f"{m.get('seconds', 0) / 60:.0f} min"
        )
    return "; ".join(parts)


def _note(root: Path, budget: str) -> str:
    try:
        stats = json.loads((root / "dataset" / "stats.json").read_text())
        ck = json.loads((final_checkpoint(root) / "checkpoint.json").read_text())
    except (OSError, ValueError):
        return f"Budget preset `{budget}`."
    m = ck.get("metrics", {})
    return (
        f"Budget preset `{budget}`: {stats['episodes']} teacher episodes ({stats['train_tokens']:,} training tokens), "
        f"student {ck['parameters'] / 1e6:.2f}M parameters ({ck['config']['num_hidden_layers']} layers x "
        f"{ck['config']['hidden_size']}, FFN {ck['config']['intermediate_size']}); {_training_summary(root)}; "
        f"final val loss {m.get('val_loss', float('nan')):.3f}, "
        f"teacher-forced action accuracy {m.get('val_action_acc', float('nan')):.3f}."
    )


def _rollout_args(root: Path) -> list[dict[str, Any]]:
    """The args of every rollouts stage the run's dataset was built from (the dataset may
    join earlier runs' weeks with this run's)."""
    try:
        paths = [Path(p).parent for p in json.loads((root / "dataset" / "args.json").read_text())["rollouts"]]
    except (OSError, ValueError, KeyError):
        paths = [root / "rollouts"]
    out = []
    for folder in paths:
        try:
            out.append(json.loads((folder / "args.json").read_text()))
        except (OSError, ValueError):
            continue
    return out


def _data_summary(root: Path, ck: dict[str, Any]) -> str:
    weeks = ck["data_stats"]["episodes"] if ck.get("data_stats") else "?"
    common = "in-distribution simulator profiles (seeds from 1,000,000; evaluation seeds are disjoint)"
    rolls = [r for r in _rollout_args(root) if r.get("episodes")]
    if not rolls or not all(r.get("shaped") for r in rolls):
        return f"{weeks} weeks of the Bayesian teacher (`bayes`) on {common}"
    total = sum(r["episodes"] for r in rolls)

    def mean(key: str, of=None) -> float:  # a share over all weeks, weighted by episodes
        return sum(r["episodes"] * r.get(key, 0.0) * (of(r) if of else 1.0) for r in rolls) / total

    fb, world = mean("feedback_share"), mean("world_share")
    share = mean("product_share", lambda r: 1.0 - r.get("feedback_share", 0.0) - r.get("world_share", 0.0))
    extra = ""
    if fb > 0:
        extra += (f", {fb:.0%} the simulator's feedback mode (noisy, answers-only or clean readings, "
                  "every answer in the prompt)")
    if world > 0:
        extra += (f", {world:.0%} clean weeks in misspecified worlds (`simulator.worlds`) labelled by "
                  f"`{rolls[-1].get('world_teacher', 'bayes-robust')}`")
    return (
        f"{weeks} weeks on {common}: {1.0 - fb - world - share:.0%} the simulator protocol's clean "
        f"weeks (the Bayesian teacher plays), {share:.0%} shaped like the product's (readings with "
        "noise sd 0.08, 30-60% of slots without readings, most actions unknown, meters stuck, the "
        "person following the advice or not and answering some of it; the teacher fed as "
        f"`rhythm recommend` feeds it){extra}; calendars in {mean('calendar_share'):.0%} of the "
        "clean and product-shaped ones (`training/realshape.py`)"
    )


def ship(root: Path, dest: Path | None, args: Args) -> Path:
    """Copy ``student-q8_0.gguf`` into ``dest`` with a generated ``MODEL_CARD.md``: a v4
    student (trained on product-shaped weeks) as ``student-real-q8_0.gguf``, the model
    ``rhythm recommend`` asks (default ``rhythm/models``); a v1 one as ``student-q8_0.gguf``,
    the simulator's (default ``agent/lab/models``)."""
    src = root / "export" / "student-q8_0.gguf"
    v4 = checkpoint_prompt_format(final_checkpoint(root)) == "rhythm v4"
    if dest is None:
        dest = REPO_ROOT / ("rhythm/models" if v4 else "agent/lab/models")
    dest.mkdir(parents=True, exist_ok=True)
    name = "student-real-q8_0.gguf" if v4 else "student-q8_0.gguf"
    shutil.copy(src, dest / name)
    ck = json.loads((final_checkpoint(root) / "checkpoint.json").read_text())
    parity = json.loads((root / "export" / "parity.json").read_text())
    results_md = Path(args.results_md) if args.results_md else root / "eval" / "results.md"
    table = (
        results_md.read_text().split("\n| policy |", 1)[1].split("\n\n", 1)[0]
        if results_md.exists()
        else ""
    )
    card = [
        "# Rhythm student (Q8_0)",
        "",
        "_Generated by `training/pipeline.py --ship`; do not edit by hand._",
        "",
        f"- Architecture: Llama, {ck['parameters'] / 1e6:.2f}M parameters, config `{json.dumps(ck['config'])}`",
        f"- File: `{name}`, {src.stat().st_size / 1e6:.2f} MB, llama.cpp (llama-cpp-python), decoded under `agent.prompting.OUTPUT_GBNF`: greedy action, each belief number the median of the model's distribution",
        f"- Prompt: `agent.prompting.render_compact` (format `{checkpoint_prompt_format(final_checkpoint(root))}`, stored in the GGUF as "
        "`rhythm.prompt_format`), the whole week in context; answer `ACTION b=S,M,W`",
        f"- Data: {_data_summary(root, ck)}",
        f"- Training: {_training_summary(root)}; final val loss {ck['metrics'].get('val_loss', float('nan')):.3f}",
        f"- Command: `rhythm train all --budget {args.budget}` (or `python -m training.pipeline --budget {args.budget}`)",
        f"- Commit: `{ck['git'].get('commit')}`{' (dirty tree)' if ck['git'].get('dirty') else ''}",
        f"- Parity with PyTorch (answers on {parity['prompts']} held-out prompts): Q8_0 actions "
        f"{parity['files']['q8_0']['action_agreement']:.3f}, whole answers {parity['files']['q8_0']['answer_agreement']:.3f}",
        "",
        "## Evaluation",
        "",
        "| policy |" + table,
        "",
        "Limits: trained on the simulator only; its beliefs are about the simulator's three "
        "dimensions (social, morning, work). Compare its rows with `bayes` above: the "
        'Bayesian agent stays available (`agent_backend = "bayes"` in config.toml).',
        "",
    ]
    (dest / ("MODEL_CARD_real.md" if v4 else "MODEL_CARD.md")).write_text("\n".join(card))
    return dest / name


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
