"""Stage 2: the dataset (compact text + target masks) and a tokenizer trained here.

Each teacher episode becomes one training sequence: ``agent.prompting.render_compact`` of
the whole week with the teacher's beliefs, i.e. exactly the prompts the student will see,
concatenated (the prompt for step t+1 is the prompt for step t + the answer + the env's
response). The targets are the 28 answer spans ``ACTION b=S,M,W`` that follow each
``slot:``; the loss mask covers only their tokens.

The tokenizer is a byte-level BPE (GPT-2 pre-tokenizer, as llama.cpp's ``gpt-2`` pre-type)
trained with ``tokenizers`` on the training texts, with ``<|endoftext|>`` as the only
special token (BOS and EOS). Every two-digit number is checked to be a single token.

    python -m training.dataset --rollouts runs/manual/rollouts/rollouts.jsonl --out runs/manual/dataset
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.prompting import (
    FORMAT_V4,
    FORMAT_VERSION,
    check_prompt_format,
    format_output,
    render_compact,
)
from simulator import spec
from training.common import (
    Progress,
    finish_output,
    help_field,
    log,
    no_progress,
    parse_args,
    prepare_output,
    seed_everything,
)
from training.tokens import CORRECTION, EOS, load_tokenizer
from training.weeks import read_rollouts, shaped, view_from_record, week_context

FORMAT = "rhythm-dataset/1"
#: Spread of a stale belief around the last good one (per dimension, clipped to [0, 1]).
STALE_SD = 0.12
_TARGET_RE = re.compile(
    rf"^(?:{'|'.join(spec.SLOTS)}):(?P<target>(?:{'|'.join(spec.ACTIONS)}) b=[0-9.]+,[0-9.]+,[0-9.]+)",
    re.MULTILINE,
)


@dataclass
class Args:
    """Dataset and tokenizer."""

    rollouts: list[str] = help_field(
        ["runs/manual/rollouts/rollouts.jsonl"], "rollout JSONL files (stage 1)"
    )
    out: str = help_field(
        "runs/manual/dataset", "output folder (tokenizer.json, train.npz, val.npz, stats.json)"
    )
    vocab_size: int = help_field(1024, "BPE vocabulary size (bytes + merges + <|endoftext|>)")
    val_fraction: float = help_field(0.05, "share of episodes held out for validation")
    tokenizer: str = help_field(
        "", "reuse this tokenizer.json instead of training one (refinement data)"
    )
    seed: int = help_field(0, "seed of the train/val split")
    stale_fraction: float = help_field(
        0.0,
        "share of training weeks (v1) whose earlier beliefs are made stale in stretches; the "
        "belief right after each stretch is the teacher's and is marked for --correction-weight "
        "(see stale_beliefs)",
    )
    prompt_format: str = help_field(
        FORMAT_VERSION,
        "rhythm v1 (past beliefs in the prompt) or rhythm v4 (the product's shape: unknowns as "
        "?, fixed slots and answers in the stream, each answer inserted after its SLOT: and "
        "hidden from later tokens, the Bayesian filter's belief before each decision; shaped "
        "weeks with filters)",
    )


#: Where a v4 step line's decision point is: right after ``SLOT:`` at the start of a line.
_STEP_RE = re.compile(rf"^(?:{'|'.join(spec.SLOTS)}):", re.MULTILINE)


def v4_text(rec: dict[str, Any]) -> tuple[str, list[str | None]]:
    """``(text, answers)`` of a week in format v4: the whole week as the prompts show it (no answers in it: what the person *did* follows each
    ``SLOT:``) and the teacher's answer line at each step (None where there is no target:
    a fixed slot)."""
    w = shaped(rec)
    views = [view_from_record(v) for v in w["views"]]
    text = render_compact(views, week_context(w), fmt=FORMAT_V4)
    answers = [None if a is None else format_output(a["action"], a["belief"]) for a in w["answers"]]
    return text, answers


def encode_inserted(
    tok, text: str, answers: list[str | tuple[str, str] | None]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids, mask, hide)`` of a v4 week: the text's tokens with each answer inserted right
    after its step's ``SLOT:``, marked as the target (``mask``) and hidden from every later
    token (``hide`` numbers the answers from 1), so the tokens after it read exactly the
    prompt of the next step (:func:`training.batches.hidden_belief_layout`). An answer given
    as ``(context, answer)`` (a v6 decision: the planner's objective line, then the answer)
    inserts both, hidden alike; only the answer is the target."""
    enc = tok.encode(text)
    points = [m.end() for m in _STEP_RE.finditer(text)]
    if len(points) != len(answers):
        raise ValueError(f"{len(points)} step lines but {len(answers)} answers")
    offsets = list(enc.offsets)
    ids, mask, hide = [tok.token_to_id(EOS)], [0], [0]

    def insert(k: int) -> None:
        if answers[k] is None:
            return
        context, answer = answers[k] if isinstance(answers[k], tuple) else ("", answers[k])
        c_ids = tok.encode(context).ids if context else []
        a_ids = tok.encode(answer).ids
        ids.extend(c_ids + a_ids)
        mask.extend([0] * len(c_ids) + [1] * len(a_ids))
        hide.extend([k + 1] * (len(c_ids) + len(a_ids)))

    k = 0
    for i, tid in enumerate(enc.ids):
        while k < len(points) and offsets[i][0] >= points[k]:
            if i == 0 or offsets[i - 1][1] != points[k]:
                raise ValueError(f"no token boundary after step line {k}'s colon")
            insert(k)
            k += 1
        ids.append(tid)
        mask.append(0)
        hide.append(0)
    if k == len(points) - 1 and points[k] == len(text):  # a week that ends at a decision
        insert(k)
        k += 1
    if k != len(points):
        raise ValueError("the text ends inside a step line")
    return (
        np.array(ids, dtype=np.int32),
        np.array(mask, dtype=np.uint8),
        np.array(hide, dtype=np.uint16),
    )


def episode_text(
    rec: dict[str, Any], context: dict[str, Any] | None = None, fmt: str = FORMAT_VERSION
) -> str:
    """The compact text of a whole episode with the teacher's beliefs (ends with a newline;
    format v4: without the answers, :func:`v4_text`)."""
    if check_prompt_format(fmt) == FORMAT_V4:
        return v4_text(rec)[0]
    if rec.get("format") != "rhythm-rollouts/1":
        raise ValueError(f"{rec.get('format')} weeks are for prompt format {FORMAT_V4}")
    shown = rec["student_beliefs"] if is_dagger(rec) else rec["beliefs"]
    beliefs = [None if b is None else tuple(b) for b in shown]
    return render_compact(rec["observations"], context or rec.get("context"), beliefs, fmt=fmt)


def is_dagger(rec: dict[str, Any]) -> bool:
    """A week the student played and the teacher labelled (``training.dagger``)."""
    return "student_actions" in rec


def encode_dagger(
    tok, text: str, teacher_answers: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(ids, mask, hide)`` of a DAgger week: ``text`` shows the student's answers; the
    teacher's answer is inserted before each, is the target (``mask``) and is hidden from
    every later token (``hide``), so the student's answer takes its positions. None when the
    student's answers are not the 28 complete ones (an invalid output in the week)."""
    enc = tok.encode(text)
    spans = target_spans(text)
    if len(spans) != len(teacher_answers):
        return None
    inside = _mark(list(enc.offsets), spans, len(enc.ids) + 1)[1:]
    ids, mask, hide = [tok.token_to_id(EOS)], [0], [0]
    k = 0
    for i, tid in enumerate(enc.ids):
        if inside[i] and (i == 0 or not inside[i - 1]):
            t_ids = tok.encode(teacher_answers[k]).ids
            ids += t_ids
            mask += [1] * len(t_ids)
            hide += [k + 1] * len(t_ids)
            k += 1
        ids.append(tid)
        mask.append(0)
        hide.append(0)
    return (
        np.array(ids, dtype=np.int32),
        np.array(mask, dtype=np.uint8),
        np.array(hide, dtype=np.uint16),
    )


def encode_record(tok, rec: dict[str, Any], text: str, fmt: str):
    """:func:`encode_episode` for teacher weeks (nothing hidden), :func:`encode_dagger` for
    relabelled student weeks, :func:`encode_inserted` for v4 weeks."""
    if fmt == FORMAT_V4:
        return encode_inserted(tok, text, v4_text(rec)[1])
    if is_dagger(rec):
        answers = [format_output(a, b) for a, b in zip(rec["actions"], rec["beliefs"], strict=True)]
        return encode_dagger(tok, text, answers)
    ids, mask, hide = encode_episode(tok, text)
    return ids, mask, np.zeros_like(hide)


def stale_beliefs(
    beliefs: list[Any], rng: np.random.Generator
) -> tuple[list[Any], list[int], list[int]]:
    """``(shown, stale, corrections)``: the teacher's beliefs with stretches made stale.

    A v1 student copies its previous belief, so at inference it keeps what it guessed early
    in the week (docs/training.md). Here, in stretches of 2-10 steps, the belief shown is a
    frozen, perturbed copy of the last one before the stretch (the prior at the start of the
    week), as a student's stale guess would be. Those beliefs are context only (``stale``:
    no loss on them); the action of every step stays a target. The first step after a stretch
    (``corrections``) writes the teacher's belief: the student must read the person from
    the meters and anomalies, the stale belief above it is of no use. Steps are 0-based."""
    shown = [None if b is None else tuple(float(x) for x in b) for b in beliefs]
    n = len(shown)
    stale: list[int] = []
    corrections: list[int] = []
    s = int(rng.integers(0, 8))
    while s + 2 < n:
        length = min(int(rng.integers(2, 11)), n - 1 - s)
        before = shown[s - 1] if s > 0 else None
        base = np.full(3, 0.5) if before is None else np.array(before)
        frozen = tuple(np.round(np.clip(base + rng.normal(0.0, STALE_SD, 3), 0.0, 1.0), 2))
        for k in range(s, s + length):
            if shown[k] is not None:
                shown[k] = tuple(float(x) for x in frozen)
                stale.append(k)
        corrections.append(s + length)
        s += length + 1 + int(rng.integers(2, 8))
    return shown, stale, corrections


def mark_stale(
    mask: np.ndarray, hide: np.ndarray, stale: list[int], corrections: list[int]
) -> np.ndarray:
    """``mask`` with no target on the beliefs of ``stale`` steps and
    :data:`training.tokens.CORRECTION` on those of ``corrections`` (``hide`` numbers the
    belief spans from 1, see :func:`encode_episode`)."""
    out = mask.copy()
    for k in stale:
        out[hide == k + 1] = 0
    for k in corrections:
        out[(hide == k + 1) & (mask > 0)] = CORRECTION
    return out


def next_beliefs(mask: np.ndarray, beliefs: list[Any]) -> np.ndarray:
    """(len(mask), 3) float16: at each token, the teacher's belief of the answer being
    written or coming next (NaN after the last answer, or where the teacher gave none).
    ``mask`` is the answer mask of :func:`encode_episode` (each answer one run of tokens);
    the targets of ``sft --aux-weight``."""
    out = np.full((len(mask), 3), np.nan, dtype=np.float16)
    on = mask > 0
    ends = np.flatnonzero(on & ~np.r_[on[1:], False]) + 1  # one past each answer's last token
    if len(ends) != len(beliefs):
        return out
    lo = 0
    for end, b in zip(ends, beliefs, strict=True):
        if b is not None:
            out[lo:end] = np.asarray(b, dtype=np.float16)
        lo = end
    return out


def _tokenizer_text(rec: dict[str, Any], text: str, fmt: str) -> str:
    if fmt != FORMAT_V4:
        return text
    return text + "\n".join(a for a in v4_text(rec)[1] if a is not None) + "\n"


def _targets_beliefs(rec: dict[str, Any], fmt: str) -> list[Any]:
    """The teacher's belief at each target of a week, in order."""
    if fmt == FORMAT_V4:
        return [a["belief"] for a in shaped(rec)["answers"] if a is not None]
    return rec["beliefs"]


def target_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the answers (``ACTION b=S,M,W``) in an episode text."""
    return [m.span("target") for m in _TARGET_RE.finditer(text)]


def belief_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the beliefs of the answers, leading space included (`` b=S,M,W``):
    :func:`encode_episode` numbers them (stale beliefs, :func:`mark_stale`)."""
    out = []
    for m in _TARGET_RE.finditer(text):
        a, b = m.span("target")
        k = text.index(" b=", a, b)
        out.append((k, b))
    return out


def train_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def _mark(offsets: list[tuple[int, int]], spans: list[tuple[int, int]], n: int) -> np.ndarray:
    """1 at (1 + i) for each token i that lies inside one of ``spans`` (sorted)."""
    out = np.zeros(n, dtype=np.uint8)
    j = 0
    for i, (a, b) in enumerate(offsets):
        while j < len(spans) and spans[j][1] <= a:
            j += 1
        if j < len(spans) and a >= spans[j][0] and b <= spans[j][1] and b > a:
            out[i + 1] = 1
    return out


def encode_episode(tok, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids, mask, hide)``: ``<|endoftext|>`` + the text's tokens; ``mask`` 1 on answer
    tokens; ``hide`` numbers the belief spans (1, 2, ...; 0 elsewhere): which beliefs
    :func:`mark_stale` takes out of the targets (a v1 student sees every past belief)."""
    enc = tok.encode(text)
    ids = np.array([tok.token_to_id(EOS), *enc.ids], dtype=np.int32)
    offs = list(enc.offsets)
    mask = _mark(offs, target_spans(text), len(ids))
    hide = np.zeros(len(ids), dtype=np.uint16)
    run = 0
    for i, flag in enumerate(_mark(offs, belief_spans(text), len(ids))):
        if flag:
            run += int(not hide[i - 1])
            hide[i] = run
    return ids, mask, hide


def _pack(
    items: list[tuple[np.ndarray, np.ndarray, np.ndarray]], pad: int, with_hide: bool
) -> dict[str, np.ndarray]:
    n = len(items)
    length = max(len(i) for i, _, _ in items)
    ids = np.full((n, length), pad, dtype=np.int32)
    mask = np.zeros((n, length), dtype=np.uint8)
    hide = np.zeros((n, length), dtype=np.uint16)
    lengths = np.zeros(n, dtype=np.int32)
    for k, (i, m, h) in enumerate(items):
        ids[k, : len(i)] = i
        mask[k, : len(m)] = m
        hide[k, : len(h)] = h
        lengths[k] = len(i)
    out = {"ids": ids, "mask": mask, "lengths": lengths}
    if with_hide:
        out["hide"] = hide
    return out


def main(args: Args, progress: Progress = no_progress) -> Path:
    seed_everything(args.seed)
    out = prepare_output(args.out, "dataset", args, args.rollouts)
    t0 = time.time()
    records = [r for p in args.rollouts for r in read_rollouts(p)]
    texts = [episode_text(r, fmt=args.prompt_format) for r in records]
    progress("dataset", 1, 3)
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(texts))
    n_val = max(1, int(round(args.val_fraction * len(texts)))) if len(texts) > 1 else 0
    val_idx, train_idx = sorted(order[:n_val].tolist()), sorted(order[n_val:].tolist())

    if args.tokenizer:
        tok = load_tokenizer(args.tokenizer)
    else:
        # v4 texts hold no answers (they are inserted as tokens): the tokenizer sees them too
        tok = train_tokenizer([_tokenizer_text(records[i], texts[i], args.prompt_format) for i in train_idx],
                              args.vocab_size)
    tok_path = out / "tokenizer.json"
    tok.save(str(tok_path))
    progress("dataset", 2, 3)

    encoded = [
        encode_record(tok, r, t, args.prompt_format) for r, t in zip(records, texts, strict=True)
    ]
    n_stale = 0
    aux = [
        None if e is None or is_dagger(r) else next_beliefs(e[1], _targets_beliefs(r, args.prompt_format))
        for r, e in zip(records, encoded, strict=True)
    ]
    if args.stale_fraction > 0:
        if args.prompt_format != FORMAT_VERSION:
            raise ValueError("--stale-fraction applies to v1 data (v4 shows no past beliefs)")
        srng = np.random.default_rng(args.seed + 1)
        for i in train_idx:
            rec = records[i]
            if is_dagger(rec) or srng.random() >= args.stale_fraction:
                continue
            shown, stale, corrections = stale_beliefs(rec["beliefs"], srng)
            text = render_compact(rec["observations"], rec.get("context"), shown, fmt=args.prompt_format)
            ids, mask, hide = encode_episode(tok, text)
            encoded[i] = (ids, mark_stale(mask, hide, stale, corrections), np.zeros_like(hide))
            aux[i] = next_beliefs(mask, rec["beliefs"])  # the teacher's, not the stale ones
            n_stale += 1
    dropped = [i for i, e in enumerate(encoded) if e is None]
    if dropped:
        log(f"dataset: {len(dropped)} DAgger weeks with an invalid student answer left out")
        train_idx = [i for i in train_idx if encoded[i] is not None]
        val_idx = [i for i in val_idx if encoded[i] is not None]
    with_hide = args.prompt_format == FORMAT_V4 or any(is_dagger(r) for r in records)
    pad = tok.token_to_id(EOS)
    files = []
    for name, idx in (("train", train_idx), ("val", val_idx)):
        if not idx:
            continue
        arrays = _pack([encoded[i] for i in idx], pad, with_hide)
        nb = np.full((*arrays["ids"].shape, 3), np.nan, dtype=np.float16)
        for row, i in enumerate(idx):
            if aux[i] is not None:
                nb[row, : len(aux[i])] = aux[i]
        arrays["belief_next"] = nb
        arrays["seeds"] = np.array([records[i]["seed"] for i in idx], dtype=np.int64)
        np.savez_compressed(out / f"{name}.npz", **arrays)
        files.append(out / f"{name}.npz")
    with (out / "val_episodes.jsonl").open("w") as f:  # for parity prompts and checks
        for i in val_idx:
            if not is_dagger(records[i]):  # the teacher's own weeks only
                f.write(json.dumps(records[i], separators=(",", ":")) + "\n")
    files.append(out / "val_episodes.jsonl")

    kept = [i for i, e in enumerate(encoded) if e is not None]
    lengths = np.array([len(encoded[i][0]) for i in kept])
    targets = np.array([int((encoded[i][1] > 0).sum()) for i in kept])
    if args.prompt_format == FORMAT_V4:
        spans = np.array([int((np.diff(np.r_[0, encoded[i][1] > 0]) == 1).sum()) for i in kept])
    else:
        spans = np.array([len(target_spans(texts[i])) for i in kept])
    numbers_single = sum(len(tok.encode(f"{k:02d}").ids) == 1 for k in range(100))
    stats = {
        "format": FORMAT,
        "prompt_format": args.prompt_format,
        "episodes": len(kept),
        "dagger_episodes": sum(is_dagger(records[i]) for i in kept),
        "stale_episodes": n_stale,
        "train_episodes": len(train_idx),
        "val_episodes": len(val_idx),
        "vocab_size": tok.get_vocab_size(),
        "tokens_per_episode_mean": float(lengths.mean()),
        "tokens_per_episode_max": int(lengths.max()),
        "train_tokens": int(sum(len(encoded[i][0]) for i in train_idx)),
        "target_tokens_per_episode_mean": float(targets.mean()),
        "answers_per_episode_min": int(spans.min()),
        "two_digit_numbers_single_token": numbers_single,
        "action_tokens": {a: len(tok.encode(a).ids) for a in spec.ACTIONS},
        "example": texts[0][:400],
        "seconds": round(time.time() - t0, 1),
    }
    if args.prompt_format != FORMAT_V4 and stats["answers_per_episode_min"] != spec.EPISODE_STEPS:
        raise ValueError(
            f"an episode text has {stats['answers_per_episode_min']} answers, expected 28"
        )
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    finish_output(out, {k: v for k, v in stats.items() if k != "example"}, [tok_path, *files])
    progress("dataset", 3, 3)
    log(
        f"dataset: {len(texts)} episodes, {stats['tokens_per_episode_mean']:.0f} tokens/episode (max {stats['tokens_per_episode_max']}), "
        f"{numbers_single}/100 two-digit numbers single tokens"
    )
    return out


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
