"""Stage 4 (optional): a per-person LoRA adapter on the student, with peft.

The deployment design keeps one base student for everyone and one small adapter per person,
fine-tuned on that person's own history. This script is that code path: the same masked
answer loss as stage 3 (training/batches.py), on a dataset of one person's weeks (stage 1 with
``--profile``, stage 2 with the student's ``--tokenizer``), training only LoRA matrices on
the attention and MLP projections. The adapter is saved with ``save_pretrained`` (a few
hundred kB); training/export.py ``--adapter`` merges it before writing the GGUF.

With ``--person`` and ``--eval-episodes`` it also plays that person's weeks (seeds apart
from the training weeks) with the base and the adapted student and records both grades.

RL against the grader is not implemented here (see docs/training.md).

    python -m training.refine --checkpoint runs/x/sft/checkpoint --data runs/x/person/dataset \
        --out runs/x/person/lora --person seed:4242 --eval-episodes 5
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training.batches import batch_tensors, evaluate_split, load_split, masked_loss
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
from training.weeks import resolve_profile


@dataclass
class Args:
    """Per-person LoRA adapter."""

    checkpoint: str = help_field("runs/manual/sft/checkpoint", "base student checkpoint (stage 3)")
    data: str = help_field(
        "runs/manual/person/dataset", "one person's dataset (stage 2 with the student's tokenizer)"
    )
    out: str = help_field(
        "runs/manual/person/lora", "output folder (adapter/, loss.csv, refine.json)"
    )
    rank: int = help_field(8, "LoRA rank")
    alpha: int = help_field(16, "LoRA alpha")
    dropout: float = help_field(0.0, "LoRA dropout")
    targets: list[str] = help_field(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        "module names that get LoRA matrices",
    )
    steps: int = help_field(100, "optimizer steps")
    minutes: float = help_field(10.0, "wall-clock budget")
    batch_size: int = help_field(4, "episodes per step")
    lr: float = help_field(1e-3, "learning rate (constant)")
    person: str = help_field(
        "", "the person ('seed:N' or a named profile) for the before/after check; empty = skip"
    )
    eval_episodes: int = help_field(
        0, "weeks of that person to play with the base and adapted student"
    )
    eval_seed_start: int = help_field(2_000_000, "first seed of the check's weeks")
    threads: int = help_field(2, "torch threads")
    seed: int = help_field(0, "seed")


def person_check(policy, profile, seeds: list[int]) -> dict[str, Any]:
    from simulator.evaluate import run_env, summarize

    g = run_env(policy, seeds, "in-dist", [profile] * len(seeds))
    r = summarize("student", "person", g)
    return {"final_score": r.final_score, "belief_mae": r.belief_mae, "episodes": r.episodes}


def main(args: Args, progress: Progress = no_progress) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    seed_everything(args.seed)
    quiet_libraries()
    torch.set_num_threads(args.threads)
    ck, data = Path(args.checkpoint), Path(args.data)
    out = prepare_output(args.out, "refine", args, [ck / "model.safetensors", data / "train.npz"])
    base_tok = json.loads((ck / "tokenizer.json").read_text())
    data_tok = json.loads((data / "tokenizer.json").read_text())
    if base_tok["model"]["vocab"] != data_tok["model"]["vocab"]:
        raise ValueError(
            "the dataset was not encoded with the student's tokenizer (stage 2 --tokenizer)"
        )
    train, val = load_split(data, "train"), load_split(data, "val")
    model = LlamaForCausalLM.from_pretrained(str(ck))
    lora = LoraConfig(
        r=args.rank,
        lora_alpha=args.alpha,
        lora_dropout=args.dropout,
        target_modules=list(args.targets),
        bias="none",
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, lora)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    inner = model.base_model.model  # the LlamaForCausalLM with LoRA layers inside
    before = evaluate_split(inner, val, args.batch_size, False) if val is not None else {}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    rng = np.random.default_rng(args.seed)
    rows, t0 = [], time.time()
    inner.train()
    for step in range(1, args.steps + 1):
        idx = np.sort(
            rng.choice(
                len(train["ids"]), size=min(args.batch_size, len(train["ids"])), replace=False
            )
        )
        ids, mask, hide = batch_tensors(train, idx)
        loss, _ = masked_loss(inner, ids, mask, hide)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        rows.append(
            {"step": step, "train_loss": loss.item(), "seconds": round(time.time() - t0, 1)}
        )
        progress("refine", step, args.steps)
        if time.time() - t0 > args.minutes * 60:
            break
    after = evaluate_split(inner, val, args.batch_size, False) if val is not None else {}
    adapter = out / "adapter"
    model.save_pretrained(adapter)
    report: dict[str, Any] = {
        "base": str(ck),
        "trainable_parameters": trainable,
        "steps": len(rows),
        "seconds": round(time.time() - t0, 1),
        "val_before": before,
        "val_after": after,
        "adapter_bytes": sum(p.stat().st_size for p in adapter.iterdir()),
        "args": asdict(args),
    }
    if args.person and args.eval_episodes:
        from training.student import TorchStudent

        profile = resolve_profile(args.person)
        seeds = list(range(args.eval_seed_start, args.eval_seed_start + args.eval_episodes))
        merged_dir = out / "merged"
        model.merge_and_unload().save_pretrained(merged_dir)
        (merged_dir / "tokenizer.json").write_bytes((ck / "tokenizer.json").read_bytes())
        report["person"] = {
            "profile": args.person,
            "base": person_check(TorchStudent(ck), profile, seeds),
            "adapted": person_check(TorchStudent(merged_dir), profile, seeds),
        }
    (out / "refine.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    with (out / "loss.csv").open("w") as f:
        f.write(
            "step,seconds,train_loss\n"
            + "".join(f"{r['step']},{r['seconds']},{r['train_loss']}\n" for r in rows)
        )
    finish_output(
        out,
        {k: report[k] for k in ("trainable_parameters", "steps", "val_before", "val_after")},
        [adapter / "adapter_model.safetensors"],
    )
    log(
        f"refine: {trainable} LoRA parameters, val loss {before.get('val_loss', float('nan')):.4f} -> {after.get('val_loss', float('nan')):.4f}"
    )
    return adapter


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
