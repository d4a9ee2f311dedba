"""Stage 3: supervised fine-tuning (algorithm distillation) of a small Llama from scratch.

The student is a ``transformers`` ``LlamaForCausalLM`` configured below (default ~3.6M
parameters: 4 layers x 256 wide, FFN 768, 4 heads, tied embeddings, vocab of stage 2).
Every training sequence is a whole teacher week (stage 2): the student reads the history
and learns to write the teacher's next ``ACTION b=S,M,W`` at every step, loss on those
answer tokens only. bf16 autocast on CPU, AdamW, warm-up then cosine decay, a wall-clock
budget. Widths stay multiples of 256 (hidden, FFN) so Q8_0/Q4_0/K-quants apply to every
matrix at export.

Outputs: ``checkpoint/`` (``save_pretrained`` + ``tokenizer.json`` + ``checkpoint.json``,
which describes the model, data, args, commit and metrics), ``loss.csv``, ``loss.png``.

    python -m training.sft --data runs/manual/dataset --out runs/manual/sft --minutes 45
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training.batches import (
    action_errors,
    batch_tensors,
    evaluate_split,
    forward_hidden,
    load_split,
    masked_loss,
    prompt_format_of,
)
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
)
from training.tokens import (
    EOS,
    BeliefTokens,
    blind_beliefs,
    donor_beliefs,
    load_tokenizer,
    step_starts,
)

CHECKPOINT_FORMAT = "rhythm-student/1"


@dataclass
class Args:
    """Student SFT from scratch."""

    data: str = help_field(
        "runs/manual/dataset", "dataset folder of stage 2 (train.npz, val.npz, tokenizer.json)"
    )
    out: str = help_field("runs/manual/sft", "output folder")
    layers: int = help_field(4, "transformer layers")
    hidden: int = help_field(256, "hidden width (a multiple of 256 for K-quants, 32 for Q8_0/Q4_0)")
    ffn: int = help_field(768, "feed-forward width (same multiples)")
    heads: int = help_field(4, "attention heads")
    kv_heads: int = help_field(4, "key/value heads (grouped-query attention when < heads)")
    context: int = help_field(2048, "max_position_embeddings (a week is ~1,100 tokens)")
    batch_size: int = help_field(8, "episodes per optimizer step")
    steps: int = help_field(3000, "maximum optimizer steps")
    minutes: float = help_field(45.0, "wall-clock budget for training (stops early, saves)")
    lr: float = help_field(1e-3, "peak learning rate")
    min_lr_ratio: float = help_field(0.1, "final learning rate as a share of the peak (cosine)")
    warmup: int = help_field(100, "warm-up steps")
    weight_decay: float = help_field(0.1, "AdamW weight decay")
    eval_every: int = help_field(100, "evaluate on val and save a checkpoint every N steps")
    bf16: bool = help_field(True, "bf16 autocast on CPU (about 2x faster)")
    threads: int = help_field(2, "torch threads")
    init_from: str = help_field("", "start from this checkpoint folder instead of random weights")
    seed: int = help_field(0, "seed (init, batch order)")
    device: str = help_field("cpu", "torch device (cpu; cuda where a GPU is lent)")
    belief_weight: float = help_field(
        2.0, "loss weight of hidden answer tokens (v4 and DAgger data) relative to the others"
    )
    aux_weight: float = help_field(
        0.0,
        "weight of an auxiliary loss: a linear head reads the teacher's next belief from the "
        "last hidden state at every token (squared error; the head is not part of the model)",
    )
    correction_weight: float = help_field(
        1.0,
        "loss weight of a belief written right after a stale stretch (dataset --stale-fraction)",
    )
    curriculum: list[int] = help_field(
        [],
        "answers per week, growing: the budget is split into equal shares and in share i every "
        "week is cut after its first curriculum[i] steps (e.g. 4 8 16 28); empty = whole weeks",
    )
    focus: float = help_field(
        0.0,
        "share of each batch drawn from the hard weeks: before training the starting model "
        "(--init-from) reads --focus-weeks training weeks teacher-forced, and a week is drawn "
        "in proportion to how many of the teacher's actions it gets wrong; 0 = uniform",
    )
    focus_weeks: int = help_field(4000, "training weeks scored for --focus (0 = all)")
    blind_fraction: float = help_field(
        0.0,
        "share of training weeks (v1 data) whose past beliefs are replaced, in the input only, "
        "by another week's: the targets stay the teacher's, so copying the context belief is "
        "useless there and only reading the meters lowers the loss",
    )


def build_model(args: Args, vocab_size: int, eos_id: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        intermediate_size=args.ffn,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=args.context,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        attention_dropout=0.0,
    )
    return LlamaForCausalLM(config)


def aux_loss(head, hidden, targets):
    """Mean squared error of ``sigmoid(head(hidden))`` against the teacher's next belief
    (``targets`` (B, L, 3), NaN where there is none); 0 when no token has one."""
    valid = ~targets.isnan().any(-1)
    if not bool(valid.any()):
        return hidden.new_zeros(())
    pred = head(hidden[valid].float()).sigmoid()
    return ((pred - targets[valid].float()) ** 2).mean()


def prefix_lengths(split: dict[str, np.ndarray], tok) -> np.ndarray:
    """(weeks, 29) token counts: entry k (1..28) keeps a week's first k steps, i.e. the text
    before step line k (the last entry is the whole week; entry 0 is unused)."""
    from simulator import spec

    ids_of = (tok.token_to_id(s) for s in spec.SLOTS)
    slot_ids = np.array([i for i in ids_of if i is not None], dtype=np.int64)
    colon = tok.token_to_id(":")
    steps = spec.EPISODE_STEPS
    out = np.zeros((len(split["ids"]), steps + 1), dtype=np.int64)
    for r, n in enumerate(split["lengths"]):
        starts = step_starts(split["ids"][r], int(n), slot_ids, colon)
        cuts = [int(c) for c in starts[1:steps]]
        out[r, 1:] = (cuts + [int(n)] * steps)[:steps]
    return out


def save_checkpoint(
    model, out: Path, args: Args, data: str | Path, metrics: dict[str, Any]
) -> Path:
    """``out/checkpoint``: weights, config, tokenizer and a self-description."""
    import shutil

    ck = out / "checkpoint"
    ck.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(ck)
    shutil.copy(Path(data) / "tokenizer.json", ck / "tokenizer.json")
    stats_path = Path(data) / "stats.json"
    n_params = sum(p.numel() for p in model.parameters())
    desc = {
        "format": CHECKPOINT_FORMAT,
        "architecture": "LlamaForCausalLM",
        "parameters": n_params,
        "config": {
            k: getattr(model.config, k)
            for k in (
                "vocab_size",
                "hidden_size",
                "intermediate_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
                "max_position_embeddings",
                "tie_word_embeddings",
            )
        },
        "prompt_format": prompt_format_of(data),
        "prompt": "agent.prompting.render_compact (first line: the prompt format); answer ACTION b=S,M,W under OUTPUT_GBNF",
        "bos": "<|endoftext|> first (add_bos)",
        "data": str(data),
        "data_stats": json.loads(stats_path.read_text()) if stats_path.exists() else None,
        "args": asdict(args),
        "git": git_commit(),
        "metrics": metrics,
        "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if desc["data_stats"]:
        desc["data_stats"].pop("example", None)
    (ck / "checkpoint.json").write_text(json.dumps(desc, indent=2, default=str) + "\n")
    return ck


def plot_loss(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = [r["step"] for r in rows if r.get("train_loss") is not None]
    ax.plot(
        steps,
        [r["train_loss"] for r in rows if r.get("train_loss") is not None],
        label="train (answer tokens)",
    )
    ev = [r for r in rows if r.get("val_loss") is not None]
    if ev:
        ax.plot([r["step"] for r in ev], [r["val_loss"] for r in ev], "o-", label="val")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
    ax.set_yscale("log")
    ax.set_title("student SFT")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def hard_weeks(
    model, train: dict[str, np.ndarray], args: Args, rng, progress: Progress
) -> tuple[np.ndarray, np.ndarray]:
    """``(weeks, p)``: the training weeks the starting model gets some action wrong in and
    the chance of drawing each (its share of the errors); empty without ``--focus``."""
    if args.focus <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    if not args.init_from:
        raise ValueError("--focus needs --init-from (the model whose errors pick the weeks)")
    n = len(train["ids"])
    pool = np.sort(rng.choice(n, size=min(n, args.focus_weeks or n), replace=False))
    errors = np.zeros(len(pool), dtype=np.int64)
    step = 64 * args.batch_size
    for lo in range(0, len(pool), step):
        part = pool[lo : lo + step]
        errors[lo : lo + len(part)] = action_errors(
            model, train, part, args.batch_size, args.bf16, args.device
        )
        progress("focus", lo + len(part), len(pool))
    hard = errors > 0
    log(
        f"sft focus: {int(hard.sum())} of {len(pool)} scored weeks have a wrong action "
        f"({int(errors.sum())} wrong actions)"
    )
    if not hard.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return pool[hard], errors[hard] / errors[hard].sum()


def main(args: Args, progress: Progress = no_progress) -> Path:
    import torch

    seed_everything(args.seed)
    quiet_libraries()
    torch.set_num_threads(args.threads)
    data = Path(args.data)
    out = prepare_output(
        args.out, "sft", args, [data / "train.npz", data / "val.npz", data / "tokenizer.json"]
    )
    train, val = load_split(data, "train"), load_split(data, "val")
    tok = load_tokenizer(data / "tokenizer.json")
    eos = tok.token_to_id(EOS)
    if args.init_from:
        from transformers import LlamaForCausalLM

        model = LlamaForCausalLM.from_pretrained(args.init_from)
    else:
        model = build_model(args, tok.get_vocab_size(), eos)
    model.to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    log(
        f"sft: {n_params / 1e6:.2f}M parameters, {len(train['ids'])} train episodes, budget {args.minutes} min / {args.steps} steps"
    )
    model.train()
    head = None
    if args.aux_weight > 0:
        if "belief_next" not in train:
            raise ValueError(f"{data} has no belief_next targets (made before --aux-weight)")
        head = torch.nn.Linear(model.config.hidden_size, 3).to(args.device)
    extra = [] if head is None else list(head.parameters())
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay + extra, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )

    def lr_at(step: int) -> float:
        """Warm-up, then cosine to min_lr_ratio at the step limit or the time budget,
        whichever comes first (the budget usually ends a CPU run)."""
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        by_steps = (step - args.warmup) / max(1, args.steps - args.warmup)
        by_time = (time.time() - t0) / max(1e-9, args.minutes * 60)
        frac = min(1.0, max(by_steps, by_time))
        return args.lr * (
            args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac))
        )

    rng = np.random.default_rng(args.seed)
    bt = BeliefTokens.of(tok)
    donors: list[np.ndarray] = []
    if args.blind_fraction > 0:
        from simulator import spec

        for r in rng.choice(len(train["ids"]), size=min(500, len(train["ids"])), replace=False):
            week = train["ids"][r, : train["lengths"][r]].astype(np.int64)
            donors.append(donor_beliefs(week, bt, spec.EPISODE_STEPS))
    if args.blind_fraction > 0 and "hide" in train:
        raise ValueError("--blind-fraction is for v1 data (v4 shows no past beliefs)")
    cuts = prefix_lengths(train, tok) if args.curriculum else None
    hard, hard_p = hard_weeks(model, train, args, rng, progress)
    order = rng.permutation(len(train["ids"]))
    pos = 0
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    tokens = 0
    metrics: dict[str, Any] = {}
    step = 0
    smooth = None
    for step in range(1, args.steps + 1):
        if pos + args.batch_size > len(order):
            order, pos = rng.permutation(len(train["ids"])), 0
        idx = order[pos : pos + args.batch_size]
        pos += args.batch_size
        n_hard = int(round(args.focus * args.batch_size)) if len(hard) else 0
        if n_hard:
            idx = np.concatenate([idx[n_hard:], rng.choice(hard, size=n_hard, p=hard_p)])
        idx = np.sort(idx)
        cut = None
        if cuts is not None:
            done = max(step / args.steps, (time.time() - t0) / max(1e-9, args.minutes * 60))
            k = args.curriculum[min(len(args.curriculum) - 1, int(done * len(args.curriculum)))]
            cut = cuts[idx, min(max(k, 1), cuts.shape[1] - 1)]
        ids, mask, hide = (
            None if t is None else t.to(args.device) for t in batch_tensors(train, idx, cut)
        )
        labels = None
        if args.blind_fraction > 0:
            blind = np.flatnonzero(rng.random(len(idx)) < args.blind_fraction)
            if len(blind):
                labels = ids
                ids = torch.from_numpy(
                    blind_beliefs(
                        ids.cpu().numpy(),
                        train["lengths"][idx] if cut is None else cut,
                        blind,
                        donors,
                        bt,
                        rng,
                    )
                ).to(args.device)
        for g in opt.param_groups:
            g["lr"] = lr_at(step - 1)
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=args.bf16):
            hidden = forward_hidden(model, ids, hide)
            loss, _ = masked_loss(
                model, ids, mask, hide, args.belief_weight, args.correction_weight, hidden, labels
            )
            if head is not None:
                nb = torch.from_numpy(
                    train["belief_next"][idx, : ids.shape[1]].astype(np.float32)
                ).to(args.device)
                loss = loss + args.aux_weight * aux_loss(head, hidden, nb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += int((train["lengths"][idx] if cut is None else cut).sum())
        lv = loss.item()
        smooth = lv if smooth is None else 0.95 * smooth + 0.05 * lv
        elapsed = time.time() - t0
        row: dict[str, Any] = {
            "step": step,
            "seconds": round(elapsed, 1),
            "tokens": tokens,
            "lr": opt.param_groups[0]["lr"],
            "train_loss": lv,
        }
        last = step == args.steps or elapsed > args.minutes * 60
        if val is not None and (step % args.eval_every == 0 or last):
            row.update(evaluate_split(model, val, args.batch_size, args.bf16, args.device))
            metrics = {
                "step": step,
                "tokens": tokens,
                "seconds": round(elapsed, 1),
                "tokens_per_second": round(tokens / max(elapsed, 1e-9)),
                "train_loss_smoothed": smooth,
                **{k: row[k] for k in ("val_loss", "val_token_acc", "val_action_acc")},
            }
            save_checkpoint(model, out, args, data, metrics)
            log(
                f"sft step {step}: train {smooth:.4f} val {row['val_loss']:.4f} action acc {row['val_action_acc']:.3f} "
                f"({tokens / elapsed:.0f} tok/s, {elapsed / 60:.1f} min)"
            )
        rows.append(row)
        progress("sft", step, args.steps)
        if last:
            break
    if val is None or not metrics:
        elapsed = time.time() - t0
        metrics = {
            "step": step,
            "tokens": tokens,
            "seconds": round(elapsed, 1),
            "train_loss_smoothed": smooth,
        }
        save_checkpoint(model, out, args, data, metrics)
    keys = [
        "step",
        "seconds",
        "tokens",
        "lr",
        "train_loss",
        "val_loss",
        "val_token_acc",
        "val_action_acc",
    ]
    with (out / "loss.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k) for k in keys})
    plot_loss(rows, out / "loss.png")
    ck = out / "checkpoint"
    finish_output(
        out, {"parameters": n_params, **metrics}, [ck / "model.safetensors", out / "loss.csv"]
    )
    return ck


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
