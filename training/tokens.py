"""The token level the stages share: the stage 2 tokenizer and its one special token, the
values of the answer mask, and where the beliefs sit in an encoded week (to read them or to
blind them, i.e. show another week's in their place).

Used by training/dataset.py (which trains the tokenizer and writes the masks),
training/sft.py, training/reading_probe.py, training/export.py and training/student.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The only special token: BOS (first token of every sequence and prompt), EOS and padding.
EOS = "<|endoftext|>"
#: ``mask`` value of the tokens of a belief written right after a stale stretch
#: (``training.dataset.stale_beliefs``); 1 marks every other answer token, 0 no target.
CORRECTION = 2


def load_tokenizer(path: str | Path):
    """``tokenizer.json`` through ``tokenizers`` (not AutoTokenizer; see local_llm.md)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


@dataclass
class BeliefTokens:
    """Token ids that make up a rendered belief ``b=.42,.71,.30`` (the two-digit numbers and
    the ``=.`` / ``,.`` pieces in front of them, as the stage 2 tokenizer splits it) and
    the ``SLOT:`` that opens each step line."""

    digits: np.ndarray
    lead: int
    comma: int
    slots: np.ndarray
    colon: int

    @classmethod
    def of(cls, tok) -> BeliefTokens:
        from simulator import spec

        def ids(pieces) -> np.ndarray:
            found = (tok.token_to_id(p) for p in pieces)
            return np.array([i for i in found if i is not None], dtype=np.int64)

        return cls(
            ids(f"{k:02d}" for k in range(100)),
            tok.token_to_id("=.") if tok.token_to_id("=.") is not None else -1,
            tok.token_to_id(",.") if tok.token_to_id(",.") is not None else -1,
            ids(spec.SLOTS),
            tok.token_to_id(":") if tok.token_to_id(":") is not None else -1,
        )


def step_starts(ids: np.ndarray, length: int, slot_ids: np.ndarray, colon: int) -> np.ndarray:
    """Positions where the step lines of one week start (``SLOT:``), in order."""
    ids = ids[:length]
    return np.flatnonzero(np.isin(ids[:-1], slot_ids) & (ids[1:] == colon))


def belief_positions(ids: np.ndarray, bt: BeliefTokens) -> tuple[np.ndarray, np.ndarray]:
    """The beliefs written in one week (the teacher's, stale or not): the positions of their
    three numbers, (beliefs, 3), and the step each belongs to, (beliefs,). A belief that is
    not three two-digit numbers (``1.00``) is left out."""
    ids = np.asarray(ids)
    n = len(ids)
    start = np.flatnonzero((ids[:-1] == bt.lead) & np.isin(ids[1:], bt.digits)) + 1
    start = start[start + 4 < n]
    ok = (
        (ids[start + 1] == bt.comma)
        & np.isin(ids[start + 2], bt.digits)
        & (ids[start + 3] == bt.comma)
        & np.isin(ids[start + 4], bt.digits)
    )
    start = start[ok]
    lines = step_starts(ids, n, bt.slots, bt.colon)
    steps = np.searchsorted(lines, start) - 1
    return np.stack([start, start + 2, start + 4], axis=1), steps


def donor_beliefs(ids: np.ndarray, bt: BeliefTokens, steps: int) -> np.ndarray:
    """(steps, 3) belief-number tokens a week showed at each step; -1 where none is readable."""
    pos, at = belief_positions(ids, bt)
    out = np.full((steps, 3), -1, dtype=np.int64)
    keep = (at >= 0) & (at < steps)
    out[at[keep]] = ids[pos[keep]]
    return out


def blind_beliefs(
    ids: np.ndarray,
    lengths: np.ndarray,
    rows: np.ndarray,
    donors: list[np.ndarray],
    bt: BeliefTokens,
    rng: np.random.Generator,
) -> np.ndarray:
    """A copy of ``ids`` in which, for each row in ``rows``, every belief but the last is
    replaced by the belief another week showed at the same step (``donors``: random other
    weeks' :func:`donor_beliefs`). The context beliefs then look like any week's but say
    nothing of this person. Only the input changes; the caller keeps ``ids`` as the labels."""
    out = ids.copy()
    for r in rows:
        pos, at = belief_positions(ids[r, : int(lengths[r])], bt)
        if len(pos) < 2:
            continue
        donor = donors[int(rng.integers(len(donors)))]
        for p, k in zip(pos[:-1], at[:-1], strict=True):
            if 0 <= k < len(donor) and donor[k, 0] >= 0:
                out[r, p] = donor[k]
    return out
