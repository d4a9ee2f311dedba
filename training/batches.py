"""A stage 2 dataset as the training stages read it: its splits and prompt format, batches
of whole weeks as tensors, what the model sees of them (hidden answer spans), the
loss on the answer tokens and the evaluation of a split.

Used by training/sft.py (stage 3 and the stages that train on from a checkpoint),
training/refine.py (LoRA) and training/reading_probe.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from training.tokens import CORRECTION


def load_split(data: str | Path, name: str) -> dict[str, np.ndarray] | None:
    """The arrays of ``<data>/<name>.npz`` (``ids``, ``mask``, ``lengths``, ...), or None."""
    p = Path(data) / f"{name}.npz"
    if not p.exists():
        return None
    with np.load(p) as z:
        return {k: z[k] for k in z.files}


def prompt_format_of(data: str | Path) -> str:
    """The prompt format of a stage 2 dataset (``rhythm v1`` for datasets made before formats
    were recorded; a retired format raises ValueError, :func:`agent.prompting.model_prompt_format`)."""
    from agent.prompting import model_prompt_format

    p = Path(data) / "stats.json"
    stats = json.loads(p.read_text()) if p.exists() else {}
    return model_prompt_format(stats.get("prompt_format"))


def hidden_belief_layout(hide: np.ndarray) -> tuple[Any, Any]:
    """``(position_ids (B, L), attention mask (B, 1, L, L) bool)`` for sequences with hidden
    spans (format v4 weeks: the answers inserted after each ``SLOT:``; DAgger weeks: the
    teacher's answers).

    ``hide`` (B, L) numbers the hidden spans (dataset stage). A span is visible only to its
    own tokens (the student writing it), never to later ones, and the tokens after it take
    the positions they would have without it: training on the whole week in one sequence
    then computes exactly what llama.cpp computes on each step's prompt, which holds no
    earlier answer (checked by the tests)."""
    import torch

    b, n = hide.shape
    pos = np.tile(np.arange(n, dtype=np.int64), (b, 1))
    end = np.full((b, n), -1, dtype=np.int64)  # per key: last index of its span
    for r in range(b):
        h = hide[r].astype(np.int64)
        spans = np.flatnonzero(h)
        if not len(spans):
            continue
        ids = h[spans]
        starts = spans[np.r_[True, ids[1:] != ids[:-1]]]
        stops = spans[np.r_[ids[1:] != ids[:-1], True]]
        for a, z in zip(starts, stops, strict=True):
            pos[r, z + 1 :] -= z - a + 1  # a span's own tokens keep the earlier spans' shift
            end[r, a : z + 1] = z
    q = torch.arange(n).view(1, n, 1)
    k = torch.arange(n).view(1, 1, n)
    end_t = torch.from_numpy(end).view(b, 1, n)
    allowed = (k <= q) & ((end_t < 0) | (q <= end_t))
    return torch.from_numpy(pos), allowed.unsqueeze(1)


def forward_hidden(model, ids, hide=None):
    """Last hidden states; with ``hide`` under :func:`hidden_belief_layout`."""
    if hide is None:
        return model.model(input_ids=ids).last_hidden_state
    pos, allowed = hidden_belief_layout(hide.cpu().numpy())
    dev = ids.device
    return model.model(
        input_ids=ids, position_ids=pos.to(dev), attention_mask=allowed.to(dev)
    ).last_hidden_state


def masked_loss(
    model,
    ids,
    mask,
    hide=None,
    belief_weight: float = 1.0,
    correction_weight: float = 1.0,
    hidden=None,
    labels=None,
):
    """Cross-entropy over the answer tokens (``mask`` > 0), and the number of them; hidden
    answer tokens (``hide`` > 0: v4 and DAgger data) weigh ``belief_weight``, the tokens of a belief written
    after a stale stretch (``mask`` == :data:`training.tokens.CORRECTION`)
    ``correction_weight``. ``labels``: the token ids to predict where they differ from the
    input ``ids`` (blinded weeks, :func:`training.tokens.blind_beliefs`)."""
    import torch.nn.functional as F

    if hidden is None:
        hidden = forward_hidden(model, ids, hide)
    hidden = hidden[:, :-1]
    sel = mask[:, 1:] > 0
    logits = model.lm_head(hidden[sel])
    targets = (ids if labels is None else labels)[:, 1:][sel]
    losses = F.cross_entropy(logits.float(), targets.long(), reduction="none")
    weighted_beliefs = hide is not None and belief_weight != 1.0
    if not weighted_beliefs and correction_weight == 1.0:
        return losses.mean(), int(sel.sum())
    w = losses.new_ones(losses.shape)
    if weighted_beliefs:
        w = w + (belief_weight - 1.0) * (hide[:, 1:][sel] > 0).float()
    if correction_weight != 1.0:
        w = w * (1.0 + (correction_weight - 1.0) * (mask[:, 1:][sel] == CORRECTION).float())
    return (losses * w).sum() / w.sum(), int(sel.sum())


#: Batches are cut to a multiple of this many tokens. Cut to its exact longest week, nearly
#: every batch had a new shape and SFT's RSS grew by about 1 GB a minute (the CPU kernels'
#: per-shape buffers, as far as we can tell); bucketed it levels off (8.1 GB over 80 min).
#: The tokens past a week's end carry no target.
LENGTH_BUCKET = 64


def bucketed(n: int, width: int) -> int:
    """``n`` rounded up to a multiple of :data:`LENGTH_BUCKET`, at most ``width``."""
    return min(width, -(-n // LENGTH_BUCKET) * LENGTH_BUCKET)


def batch_tensors(split: dict[str, np.ndarray], idx: np.ndarray, cut: np.ndarray | None = None):
    """``(ids, mask, hide or None)`` of episodes ``idx``, cut to the longest (rounded up by
    :func:`bucketed`); with ``cut`` (one length per episode) every episode ends there (the
    answers after it are no targets)."""
    import torch

    ends = split["lengths"][idx] if cut is None else cut
    n = bucketed(int(ends.max()), split["ids"].shape[1])
    mask = split["mask"][idx, :n].astype(np.int64)
    if cut is not None:
        mask[np.arange(n)[None, :] >= cut[:, None]] = 0
    hide = split.get("hide")
    return (
        torch.from_numpy(split["ids"][idx, :n].astype(np.int64)),
        torch.from_numpy(mask),
        None if hide is None else torch.from_numpy(hide[idx, :n].astype(np.int64)),
    )


def _scored_batches(model, split, idx: np.ndarray, batch_size: int, bf16: bool, device: str):
    """Teacher-forced answers of episodes ``idx``, a batch at a time: ``(rows, logits,
    targets, first)`` per batch, one entry per answer token: its episode (a position in
    ``idx``), the logits, the teacher's token and whether it is an answer's first token
    (the action)."""
    import torch

    model.eval()
    with torch.no_grad(), torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=bf16):
        for lo in range(0, len(idx), batch_size):
            part = idx[lo : lo + batch_size]
            ids, mask, hide = (
                None if t is None else t.to(device) for t in batch_tensors(split, part)
            )
            hidden = forward_hidden(model, ids, hide)[:, :-1]
            sel = mask[:, 1:] > 0
            m = sel.long()
            first = (m == 1) & (torch.nn.functional.pad(m, (1, 0))[:, :-1] == 0)
            rows = torch.nonzero(sel)[:, 0] + lo
            yield rows, model.lm_head(hidden[sel]).float(), ids[:, 1:][sel], first[sel]
    model.train()


def evaluate_split(
    model, split, batch_size: int, bf16: bool, device: str = "cpu"
) -> dict[str, float]:
    """Val loss on answer tokens and teacher-forced accuracy of the answers' first token
    (the action) and of all answer tokens."""
    import torch

    tot, n, first_ok, first_n, all_ok = 0.0, 0, 0, 0, 0
    idx = np.arange(len(split["ids"]))
    for _, logits, targets, first in _scored_batches(model, split, idx, batch_size, bf16, device):
        tot += float(torch.nn.functional.cross_entropy(logits, targets, reduction="sum"))
        n += len(targets)
        pred = logits.argmax(-1)
        all_ok += int((pred == targets).sum())
        first_ok += int((pred[first] == targets[first]).sum())
        first_n += int(first.sum())
    return {
        "val_loss": tot / max(n, 1),
        "val_token_acc": all_ok / max(n, 1),
        "val_action_acc": first_ok / max(first_n, 1),
    }


def action_errors(
    model, split, idx: np.ndarray, batch_size: int, bf16: bool, device: str = "cpu"
) -> np.ndarray:
    """How many of its actions the model gets wrong, teacher-forced, in each episode of
    ``idx`` (the hard weeks SFT's ``--focus`` draws from)."""
    errors = np.zeros(len(idx), dtype=np.int64)
    for rows, logits, targets, first in _scored_batches(
        model, split, np.asarray(idx), batch_size, bf16, device
    ):
        wrong = rows[first][logits[first].argmax(-1) != targets[first]]
        errors += np.bincount(wrong.cpu().numpy(), minlength=len(idx))
    return errors


def action_logits(
    model, split, idx: np.ndarray, action_ids: np.ndarray, batch_size: int, device: str = "cpu"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Teacher-forced scores of every decision in episodes ``idx``: ``(rows, logits,
    targets)``, one entry per answer's first token (the action): its episode (a position in
    ``idx``), the logits of the tokens ``action_ids`` (one per action, in action order) and
    the teacher's token (training.calibrate fits the action bias on them)."""
    import torch

    rows_out, logits_out, targets_out = [], [], []
    cols = torch.as_tensor(np.asarray(action_ids, dtype=np.int64))
    for rows, logits, targets, first in _scored_batches(
        model, split, np.asarray(idx), batch_size, False, device
    ):
        rows_out.append(rows[first].cpu().numpy())
        logits_out.append(logits[first][:, cols].cpu().numpy())
        targets_out.append(targets[first].cpu().numpy())
    if not rows_out:
        return np.zeros(0, np.int64), np.zeros((0, len(cols)), np.float32), np.zeros(0, np.int64)
    return np.concatenate(rows_out), np.concatenate(logits_out), np.concatenate(targets_out)
