"""Fine-tune the bundled student on the day planner's decisions (issue 37).

Reads the decisions of ``lab.planner_days`` (``rhythm train planner-days``), continues
from a student GGUF (default: the bundled ``rhythm/models/student-real-q8_0.gguf``, read
back into PyTorch by ``training.checkpoints.load_gguf_student``; its tokenizer without the
BOS post-processor) and writes a new Q8_0 GGUF of the same prompt format:

1. dataset: a person's decisions of one week share their prompts (each prompt is the next
   one's prefix, mostly: see ``week_groups``), so each run of them is one sequence, the last prompt with every
   decision's answer inserted at the end of its own prompt and hidden from the tokens after
   it (``training.dataset.encode_inserted``, the v4 layout of stage 2): exactly the prompts
   the product gives the model. Decisions with the planner's objective line (``objective``,
   ``lab.planner_days``) make a v6 student: the line is inserted before the answer, read but
   not a target, and hidden like it; ``no_objective`` of them go without it, so the student
   also reads v4 prompts (the simulator's, the refine step's). Whole people are held out for validation;
2. SFT from the GGUF's weights (``training.sft`` with ``init_from``; the loss on the answer
   tokens only), a wall-clock budget;
3. export: f32 GGUF, Q8_0, and parity of llama.cpp with PyTorch on held-out prompts
   (``training.export.check_parity``).

``report.json`` holds the teacher-forced agreement with the planner on the held-out people
before and after, the minutes, and the parity.

    python -m training.planner_tune --examples runs/planner-days/examples.jsonl --out runs/planner-tune --minutes 20
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, timedelta
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
    quiet_libraries,
    seed_everything,
)

BUNDLED = str(Path(__file__).resolve().parent.parent / "rhythm" / "models" / "student-real-q8_0.gguf")
#: One decision of ``lab.planner_days`` (``rhythm train planner-days``) per line.
FORMAT = "rhythm-planner-days/1"


@dataclass
class Args:
    """Fine-tune a student GGUF on planner-labelled decisions."""

    examples: list[str] = help_field(["runs/planner-days/examples.jsonl"], "examples.jsonl of planner-days")
    base: str = help_field(BUNDLED, "the student GGUF to continue from (prompt format v4)")
    out: str = help_field("runs/planner-tune", "output folder (dataset/, base/, sft/, export/, report.json)")
    val_people: float = help_field(0.1, "share of people held out for validation and parity")
    minutes: float = help_field(15.0, "SFT wall-clock budget")
    steps: int = help_field(600, "SFT maximum optimizer steps")
    batch_size: int = help_field(8, "weeks per optimizer step")
    lr: float = help_field(3e-4, "peak learning rate (cosine to a tenth)")
    warmup: int = help_field(20, "warm-up steps")
    eval_every: int = help_field(50, "evaluate and save every N steps")
    threads: int = help_field(2, "torch threads")
    parity_prompts: int = help_field(48, "held-out prompts for the llama.cpp parity check")
    seed: int = help_field(0, "seed (split, batch order)")
    no_objective: float = help_field(0.15, "share of v6 decisions trained without their objective line")


def week_groups(examples: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The decisions of each (person, week) in time order, cut into runs in which each
    prompt is the prefix of the next one's (one sequence holds a run). A run ends where the
    product re-frames an earlier day of the week differently (today's frame knows ``now``
    and the shift patterns; ``rhythm.ask_model.week_fixed`` re-frames earlier days without
    them, so a ``cal`` line can change from one decision to the next)."""
    groups: dict[tuple[int, date], list[dict[str, Any]]] = defaultdict(list)
    for ex in examples:
        d = date.fromisoformat(ex["day"])
        groups[(int(ex["seed"]), d - timedelta(days=d.weekday()))].append(ex)
    out = []
    for key in sorted(groups):
        run: list[dict[str, Any]] = []
        for ex in groups[key]:
            if run and not ex["prompt"].startswith(run[-1]["prompt"]):
                out.append(run)
                run = []
            run.append(ex)
        out.append(run)
    return out


def with_objective(ex: dict[str, Any], rng: np.random.Generator | None, no_objective: float) -> str | tuple[str, str]:
    """A decision's answer as ``encode_inserted`` inserts it: ``(objective line, answer)``
    for a v6 decision (but a ``no_objective`` share of them, by ``rng``), else the answer."""
    line = ex.get("objective") or ""
    if not line or (rng is not None and rng.random() < no_objective):
        return ex["answer"]
    return (line, ex["answer"])


def prompt_format_of(examples: list[dict[str, Any]]) -> str:
    """v6 when the decisions carry the planner's objective line, else v4."""
    from agent.prompting import FORMAT_V4, FORMAT_V6

    return FORMAT_V6 if any("objective" in ex for ex in examples) else FORMAT_V4


def encode_week(tok, group: list[dict[str, Any]], rng: np.random.Generator | None = None,
                no_objective: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids, mask, hide)`` of one week's decisions (module docstring, step 1)."""
    from training.dataset import _STEP_RE, encode_inserted

    text = group[-1]["prompt"]
    ends = {len(ex["prompt"]): with_objective(ex, rng, no_objective) for ex in group}
    answers = [ends.get(m.end()) for m in _STEP_RE.finditer(text)]
    if sum(a is not None for a in answers) != len(group):
        raise ValueError(f"person {group[0]['seed']}: a decision's prompt does not end at a step line")
    return encode_inserted(tok, text, answers)


def read_examples(path: str | Path) -> list[dict[str, Any]]:
    """The decisions of an examples.jsonl (format checked)."""
    out = []
    for i, line in enumerate(Path(path).read_text().splitlines()):
        rec = json.loads(line)
        if rec.get("format") != FORMAT:
            raise ValueError(f"{path}:{i + 1}: expected format {FORMAT}, got {rec.get('format')!r}")
        out.append(rec)
    return out


def product_tokenizer(tok):
    """The GGUF's tokenizer as the stages use it: no BOS added by ``encode`` (the dataset
    puts ``<|endoftext|>`` first itself)."""
    tok.post_processor = None
    return tok


def write_dataset(out: Path, tok, groups: list[list[dict[str, Any]]], val_seeds: set[int], fmt: str,
                  no_objective: float = 0.0, seed: int = 0) -> dict[str, Any]:
    """A stage 2 dataset folder (train.npz, val.npz, tokenizer.json, stats.json). Validation
    decisions always carry their objective line (what the product asks)."""
    from training.dataset import _pack
    from training.tokens import EOS

    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(tok.to_str())
    pad = tok.token_to_id(EOS)
    stats: dict[str, Any] = {"format": "rhythm-dataset/1", "prompt_format": fmt, "source": "planner-days"}
    rng = np.random.default_rng([seed, 5])
    for name, keep in (("train", lambda s: s not in val_seeds), ("val", lambda s: s in val_seeds)):
        gs = [g for g in groups if keep(int(g[0]["seed"]))]
        items = [encode_week(tok, g, rng if name == "train" else None, no_objective) for g in gs]
        arrays = _pack(items, pad, True)
        arrays["seeds"] = np.array([int(g[0]["seed"]) for g in gs], dtype=np.int64)
        np.savez_compressed(out / f"{name}.npz", **arrays)
        stats[f"{name}_weeks"] = len(gs)
        stats[f"{name}_decisions"] = sum(len(g) for g in gs)
        stats[f"{name}_tokens"] = int(sum(len(i) for i, _, _ in items))
        stats[f"{name}_tokens_per_week_max"] = int(max(len(i) for i, _, _ in items))
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def base_checkpoint(model, tok, out: Path, fmt: str) -> Path:
    """The GGUF's weights as a checkpoint folder ``training.sft`` can start from (it will be
    a student of prompt format ``fmt``)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from training.sft import CHECKPOINT_FORMAT

    out.mkdir(parents=True, exist_ok=True)
    # the weights are dequantized already: a plain model of the same config holds them
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    plain = LlamaForCausalLM(LlamaConfig.from_dict(config))
    plain.load_state_dict(model.state_dict())
    plain.save_pretrained(out)
    (out / "tokenizer.json").write_text(tok.to_str())
    (out / "checkpoint.json").write_text(json.dumps({"format": CHECKPOINT_FORMAT, "prompt_format": fmt}) + "\n")
    return out


def main(args: Args, progress: Progress = no_progress) -> dict[str, Any]:
    import torch

    from agent.prompting import WEEK_FORMATS
    from training.batches import evaluate_split, load_split
    from training.checkpoints import gguf_prompt_format, load_gguf_student, write_gguf
    from training.export import check_parity, quantize
    from training.sft import Args as SftArgs
    from training.sft import main as sft_main
    from training.student import TorchStudent

    seed_everything(args.seed)
    quiet_libraries()
    torch.set_num_threads(args.threads)
    out = prepare_output(args.out, "planner_tune", args, [*args.examples, args.base])
    t0 = time.time()
    if gguf_prompt_format(args.base) not in WEEK_FORMATS:
        raise ValueError(f"{args.base}: not a {' or '.join(WEEK_FORMATS)} student")
    examples = [ex for p in args.examples for ex in read_examples(p)]
    fmt = prompt_format_of(examples)
    groups = week_groups(examples)
    seeds = sorted({int(g[0]["seed"]) for g in groups})
    rng = np.random.default_rng(args.seed)
    n_val = max(1, int(round(args.val_people * len(seeds))))
    val_seeds = {int(s) for s in rng.permutation(seeds)[:n_val]}

    model, tok = load_gguf_student(Path(args.base))
    tok = product_tokenizer(tok)
    data = out / "dataset"
    stats = write_dataset(data, tok, groups, val_seeds, fmt, args.no_objective, args.seed)
    base = base_checkpoint(model, tok, out / "base", fmt)
    val = load_split(data, "val")
    model.eval()
    before = evaluate_split(model, val, args.batch_size, True)
    log(f"planner-tune: {stats['train_decisions']} train / {stats['val_decisions']} val decisions; "
        f"before: val action acc {before['val_action_acc']:.3f}")
    progress("planner-tune", 1, 4)

    t_sft = time.time()
    ck = sft_main(SftArgs(data=str(data), out=str(out / "sft"), init_from=str(base), minutes=args.minutes,
                          steps=args.steps, batch_size=args.batch_size, lr=args.lr, warmup=args.warmup,
                          eval_every=args.eval_every, threads=args.threads, seed=args.seed, weight_decay=0.0),
                  progress)
    sft_minutes = (time.time() - t_sft) / 60
    progress("planner-tune", 2, 4)

    student = TorchStudent(ck, threads=1)
    exp = out / "export"
    exp.mkdir(exist_ok=True)
    f32 = write_gguf(student.model, ck / "tokenizer.json", exp / "student-f32.gguf", fmt)
    q8 = quantize(f32, exp / "student-real-q8_0.gguf", "q8_0")
    f32.unlink()
    progress("planner-tune", 3, 4)
    held = [ex for ex in examples if int(ex["seed"]) in val_seeds]
    picks = np.random.default_rng(args.seed + 1).permutation(len(held))[: args.parity_prompts]
    prompts = [{"seed": held[i]["seed"], "t": f"{held[i]['day']} {held[i]['slot']}", "prompt": held[i]["prompt"] + held[i].get("objective", ""),
                "planner": held[i]["action"]} for i in sorted(picks)]
    torch_answers = [student.complete(p["prompt"]) for p in prompts]
    parity = check_parity(torch_answers, q8, prompts, 2048)
    after = json.loads((ck / "checkpoint.json").read_text())["metrics"]
    progress("planner-tune", 4, 4)
    report = {
        "base": args.base, "examples": len(examples), "people": len(seeds), "val_people": sorted(val_seeds),
        "dataset": stats,
        "val_action_acc_before": round(before["val_action_acc"], 4), "val_loss_before": round(before["val_loss"], 4),
        "val_action_acc_after": round(after.get("val_action_acc", float("nan")), 4),
        "val_loss_after": round(after.get("val_loss", float("nan")), 4),
        "sft_steps": after.get("step"), "sft_minutes": round(sft_minutes, 1),
        "minutes": round((time.time() - t0) / 60, 1), "model": str(q8), "bytes": q8.stat().st_size,
        "parity": {k: parity[k] for k in ("prompts", "valid", "action_agreement", "answer_agreement")},
    }
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    finish_output(out, report, [q8])
    log(f"planner-tune: val action acc {report['val_action_acc_before']} -> {report['val_action_acc_after']}, "
        f"parity actions {parity['action_agreement']:.3f}, {report['minutes']} min -> {q8}")
    return report


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
