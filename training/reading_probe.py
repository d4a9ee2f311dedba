"""Diagnosis: does the student read the person from the meters, or copy its context?

A v1 prompt shows the belief written at every earlier step. A student can lower its training
loss by copying that belief (the teacher's changes little from one step to the next) without
ever learning to read the person from the meters, rewards and anomalies. This probe tells
the two apart on held-out weeks, teacher-forced, step by step:

- **shown**: the week as it was trained, the teacher's earlier beliefs in the text;
- **blind**: the same week with every earlier belief replaced by the one another week showed
  at the same step (``training.tokens.blind_beliefs``): the text looks like any week, but its
  beliefs say nothing of this person, so only reading can beat the constant guess.

Each belief number is decoded as the median of the model's distribution over ``00``..``99``
(as the runtime does). Errors are to the true belief, next to the teacher's own and the best
constant guess's (the median truth of these weeks). Outputs: ``probe.csv`` (one row per
step), ``probe.png``, ``summary.json``.

    python -m training.reading_probe --checkpoint runs/full/sft/checkpoint --data runs/full/dataset --out runs/full/probe
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training.batches import load_split, prompt_format_of
from training.common import (
    Progress,
    finish_output,
    help_field,
    log,
    no_progress,
    parse_args,
    prepare_output,
)
from training.tokens import (
    BeliefTokens,
    belief_positions,
    blind_beliefs,
    donor_beliefs,
    load_tokenizer,
)

DIMENSIONS = ("social", "morning", "work")


@dataclass
class Args:
    """Reading probe of a student checkpoint on held-out weeks."""

    checkpoint: str = help_field("runs/manual/sft/checkpoint", "student checkpoint folder")
    data: str = help_field(
        "runs/manual/dataset", "dataset folder of stage 2 (val.npz, val_episodes.jsonl)"
    )
    out: str = help_field("runs/manual/probe", "output folder (probe.csv, probe.png)")
    weeks: int = help_field(100, "held-out weeks to probe (at most the val split)")
    batch_size: int = help_field(8, "weeks per forward pass")
    threads: int = help_field(2, "torch threads")
    seed: int = help_field(0, "seed (which week lends its beliefs)")


def decode_beliefs(logits: np.ndarray, positions: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """(answers, 3) beliefs read from ``logits`` (tokens, vocab) at the belief-number
    ``positions`` (answers, 3; -1 where the week shows none): the median number of the
    distribution one token earlier, NaN where there is no position."""
    from agent.prompting import median_number

    flat = [
        np.nan if p < 0 else median_number(logits[p - 1, digits]) / 100.0 for p in positions.ravel()
    ]
    return np.array(flat, dtype=np.float64).reshape(positions.shape)


def probe(
    model,
    split: dict[str, np.ndarray],
    tok,
    n: int,
    batch_size: int,
    seed: int,
    progress: Progress = no_progress,
):
    """(weeks, answers, 3) beliefs of the student on the first ``n`` weeks as shown and
    blinded (NaN where the week shows no two-digit belief), and their rows in ``split``."""
    import torch

    from simulator import spec

    bt = BeliefTokens.of(tok)
    ids_of = (tok.token_to_id(f"{k:02d}") for k in range(100))
    digits = np.array([-1 if i is None else i for i in ids_of], dtype=np.int64)
    rows, positions = [], []
    for r in range(min(n, len(split["ids"]))):
        pos, at = belief_positions(split["ids"][r, : split["lengths"][r]], bt)
        full = np.full((spec.EPISODE_STEPS, 3), -1, dtype=np.int64)
        keep = (at >= 0) & (at < spec.EPISODE_STEPS)
        full[at[keep]] = pos[keep]  # a belief written 1.00 stays -1 (not two digits)
        rows.append(r)
        positions.append(full)
    if not rows:
        raise ValueError("no held-out weeks to probe")
    rng = np.random.default_rng(seed)
    shown, blind = [], []
    model.eval()
    count = len(rows)
    for lo in range(0, count, batch_size):
        batch = range(lo, min(lo + batch_size, count))
        idx = np.array([rows[i] for i in batch])
        length = int(split["lengths"][idx].max())
        ids = split["ids"][idx, :length].astype(np.int64)
        blinded = ids.copy()
        for j, i in enumerate(batch):
            d = (i + 1) % count  # each week borrows the beliefs of the next week
            donor = donor_beliefs(
                split["ids"][rows[d], : split["lengths"][rows[d]]].astype(np.int64),
                bt,
                spec.EPISODE_STEPS,
            )
            blinded[j : j + 1] = blind_beliefs(
                ids[j : j + 1], split["lengths"][idx[j : j + 1]], np.array([0]), [donor], bt, rng
            )
        for text, out in ((ids, shown), (blinded, blind)):
            with torch.no_grad():
                logits = model(input_ids=torch.from_numpy(text)).logits.float().numpy()
            for j, i in enumerate(batch):
                out.append(decode_beliefs(logits[j], positions[i], digits))
        progress("probe", batch.stop, count)
    return np.array(shown), np.array(blind), rows


def plot(steps: np.ndarray, curves: dict[str, np.ndarray], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, y in curves.items():
        ax.plot(steps, y, label=name, linestyle="--" if name == "constant guess" else "-")
    ax.set_xlabel("step of the week (teacher-forced)")
    ax.set_ylabel("belief error to the truth (mean of 3)")
    ax.set_title("Reading probe: the student with its earlier beliefs shown and blinded")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(args: Args, progress: Progress = no_progress) -> Path:
    import torch
    from transformers import LlamaForCausalLM

    torch.set_num_threads(args.threads)
    data, ck = Path(args.data), Path(args.checkpoint)
    out = prepare_output(
        args.out, "reading_probe", args, [data / "val.npz", ck / "model.safetensors"]
    )
    split = load_split(data, "val")
    if split is None:
        raise ValueError(f"{data} has no val.npz")
    if prompt_format_of(data) != "rhythm v1":
        raise ValueError("the reading probe is for v1 data (v4 prompts show no earlier belief)")
    if "hide" in split:
        raise ValueError(f"{data} holds DAgger weeks; probe a dataset of teacher weeks")
    episodes = {}
    with (data / "val_episodes.jsonl").open() as f:
        for line in f:
            e = json.loads(line)
            episodes[int(e["seed"])] = e
    tok = load_tokenizer(data / "tokenizer.json")
    model = LlamaForCausalLM.from_pretrained(ck)
    shown, blind, rows = probe(model, split, tok, args.weeks, args.batch_size, args.seed, progress)
    recs = [episodes[int(split["seeds"][r])] for r in rows]
    truth = np.array([e["belief_truth"] for e in recs], dtype=np.float64)
    teacher = np.array([e["beliefs"] for e in recs], dtype=np.float64)[:, : shown.shape[1]]
    const = np.median(truth, axis=0)
    teacher = np.where(np.isnan(shown), np.nan, teacher)  # the same steps for all
    err = {
        "student, earlier beliefs shown": np.nanmean(np.abs(shown - truth[:, None]), axis=(0, 2)),
        "student, earlier beliefs blinded": np.nanmean(np.abs(blind - truth[:, None]), axis=(0, 2)),
        "teacher": np.nanmean(np.abs(teacher - truth[:, None]), axis=(0, 2)),
        "constant guess": np.full(shown.shape[1], np.abs(truth - const).mean()),
    }
    steps = np.arange(shown.shape[1])
    with (out / "probe.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "shown", "blind", "teacher", "constant"])
        for k in steps:
            w.writerow([int(k), *(round(float(v[k]), 4) for v in err.values())])
    plot(steps, err, out / "probe.png")
    last = {
        "shown": np.nanmean(np.abs(shown[:, -1] - truth), axis=0),
        "blind": np.nanmean(np.abs(blind[:, -1] - truth), axis=0),
        "teacher": np.nanmean(np.abs(teacher[:, -1] - truth), axis=0),
        "constant": np.abs(truth - const).mean(axis=0),
    }
    summary: dict[str, Any] = {
        "weeks": len(rows),
        "last_step": {
            k: dict(zip(DIMENSIONS, np.round(v, 4).tolist(), strict=True)) for k, v in last.items()
        },
        "last_step_mean": {k: round(float(v.mean()), 4) for k, v in last.items()},
        # how much of the constant guess's error reading removes, over all steps but the first
        "blind_gain_over_constant": round(
            float((err["constant guess"][1:] - err["student, earlier beliefs blinded"][1:]).mean()),
            4,
        ),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    log(
        "reading probe: last-step belief error "
        + ", ".join(f"{k} {v:.3f}" for k, v in summary["last_step_mean"].items())
    )
    finish_output(out, summary, [out / "probe.csv"])
    return out


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
