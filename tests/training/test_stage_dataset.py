"""Stage 2, dataset and tokenizer (training.dataset, training.tokens): the 28 answers as
targets, the masks, stale beliefs and their corrections, blinded weeks."""

from __future__ import annotations

import numpy as np
import pytest

from agent.prompting import format_output, parse_output
from simulator import spec


def test_targets_are_the_28_answers(records, with_beliefs):
    from training.dataset import episode_text, target_spans

    rec = with_beliefs(records[0], np.random.default_rng(0))
    text = episode_text(rec)
    answers = [text[a:b] for a, b in target_spans(text)]
    assert answers == [
        format_output(a, b) for a, b in zip(rec["actions"], rec["beliefs"], strict=True)
    ]
    assert all(parse_output(x).valid for x in answers)


def test_episode_without_beliefs_has_answers_without_belief_and_no_targets(records):
    from training.dataset import episode_text, target_spans

    assert target_spans(episode_text(records[0])) == []  # the heuristic emits no belief


@pytest.mark.ml
def test_mask_covers_exactly_the_answer_tokens(records, with_beliefs):
    from training.dataset import encode_episode, episode_text, train_tokenizer
    from training.tokens import EOS

    rng = np.random.default_rng(1)
    recs = [with_beliefs(r, rng) for r in records]
    texts = [episode_text(r) for r in recs]
    tok = train_tokenizer(texts, 600)
    ids, mask, hide = encode_episode(tok, texts[0])
    assert ids[0] == tok.token_to_id(EOS) and len(ids) == len(mask) == len(hide)
    assert tok.decode(ids[1:].tolist()) == texts[0]
    masked = tok.decode(ids[mask == 1].tolist())
    assert masked == "".join(
        format_output(a, b) for a, b in zip(recs[0]["actions"], recs[0]["beliefs"], strict=True)
    )
    # the numbered spans are exactly the 28 beliefs, in order, inside the answers (mark_stale)
    assert texts[0].startswith("rhythm v1\n")
    assert sorted(set(hide[hide > 0].tolist())) == list(range(1, spec.EPISODE_STEPS + 1))
    assert np.all(mask[hide > 0] == 1)
    for k, b in enumerate(recs[0]["beliefs"], start=1):
        assert tok.decode(ids[hide == k].tolist()) == " " + format_output(0, b).split(" ", 1)[1]


def test_stale_stretches_freeze_earlier_beliefs_and_end_on_the_teachers():
    from training.dataset import stale_beliefs

    rng = np.random.default_rng(0)
    teacher = [tuple(np.round(rng.uniform(0, 1, 3), 2)) for _ in range(spec.EPISODE_STEPS)]
    for seed in range(40):
        shown, stale, corrections = stale_beliefs(teacher, np.random.default_rng(seed))
        assert len(shown) == spec.EPISODE_STEPS and corrections
        assert set(stale).isdisjoint(corrections)
        assert max(corrections) <= spec.EPISODE_STEPS - 1
        for k in range(spec.EPISODE_STEPS):
            if k not in stale:
                assert shown[k] == teacher[k]  # every target is the teacher's belief
            else:
                assert all(0.0 <= x <= 1.0 for x in shown[k])
        stretches = np.split(np.array(stale), np.flatnonzero(np.diff(stale) > 1) + 1)
        assert [int(s[-1]) + 1 for s in stretches] == corrections  # each ends on a correction
        for s in stretches:
            assert len({shown[k] for k in s}) == 1  # frozen inside a stretch
            assert 2 <= len(s) <= 10
    # the perturbation moves the frozen belief away from the last good one (sd 0.12)
    moved = [
        np.abs(np.subtract(sh[st[0]], teacher[st[0] - 1])).mean()  # first stretch
        for sh, st, _ in (stale_beliefs(teacher, np.random.default_rng(s)) for s in range(40))
        if st[0] > 0
    ]
    assert 0.03 < np.mean(moved) < 0.2


@pytest.mark.ml
def test_stale_beliefs_are_context_and_the_correction_is_a_weighted_target(records, with_beliefs):
    from training.dataset import (
        encode_episode,
        episode_text,
        mark_stale,
        stale_beliefs,
        train_tokenizer,
    )
    from training.tokens import CORRECTION

    rng = np.random.default_rng(2)
    rec = with_beliefs(records[0], rng)
    shown, stale, corrections = stale_beliefs(rec["beliefs"], np.random.default_rng(5))
    text = episode_text({**rec, "beliefs": shown})
    tok = train_tokenizer([text, episode_text(rec)], 600)
    ids, mask, hide = encode_episode(tok, text)
    marked = mark_stale(mask, hide, stale, corrections)
    assert np.all(marked[mask == 0] == 0)
    for k in range(spec.EPISODE_STEPS):
        span = hide == k + 1
        want = 0 if k in stale else CORRECTION if k in corrections else 1
        assert np.all(marked[span] == want), k
    assert tok.decode(ids[marked == CORRECTION].tolist()) == "".join(
        " " + format_output(0, rec["beliefs"][k]).split(" ", 1)[1] for k in corrections
    )
    # every action stays a target, stale step or not
    actions = tok.decode(ids[(marked == 1) & (hide == 0)].tolist())
    assert actions == "".join(spec.ACTIONS[a] for a in rec["actions"])


def test_next_beliefs_give_every_token_the_answer_it_leads_to():
    from training.dataset import next_beliefs

    # tokens: p p [a a] p [a] p p   (two answers)
    mask = np.array([0, 0, 1, 2, 0, 1, 0, 0], dtype=np.uint8)
    out = next_beliefs(mask, [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    assert out.dtype == np.float16 and out.shape == (8, 3)
    assert np.allclose(out[:4], [0.1, 0.2, 0.3], atol=1e-3)
    assert np.allclose(out[4:6], [0.4, 0.5, 0.6], atol=1e-3)
    assert np.isnan(out[6:]).all()
    assert np.isnan(next_beliefs(mask, [[0.1, 0.2, 0.3]])).all()  # answers and beliefs disagree
    assert np.isnan(next_beliefs(mask, [None, [0.4, 0.5, 0.6]])[:4]).all()


@pytest.mark.ml
def test_blinded_weeks_show_another_weeks_beliefs_in_the_input_only(records, with_beliefs):
    from training.dataset import encode_episode, episode_text, train_tokenizer
    from training.tokens import BeliefTokens, belief_positions, blind_beliefs, donor_beliefs

    rng = np.random.default_rng(4)
    recs = [with_beliefs(r, rng) for r in records[:3]]
    recs[0]["beliefs"][7] = [1.0, 0.5, 0.5]  # written 1.00: not a two-digit belief
    texts = [episode_text(r) for r in recs]
    numbers = " ".join(f"b=.{k:02d},.{99 - k:02d}" for k in range(100))
    tok = train_tokenizer(texts + [numbers] * 3, 600)
    enc = [encode_episode(tok, t)[0] for t in texts]
    n = max(len(e) for e in enc)
    ids = np.zeros((3, n), dtype=np.int64)
    lengths = np.array([len(e) for e in enc])
    for r, i in enumerate(enc):
        ids[r, : len(i)] = i
    bt = BeliefTokens.of(tok)
    found = [belief_positions(ids[r, : lengths[r]], bt) for r in range(3)]
    pos, at = found[0]
    assert 7 not in at and len(at) >= spec.EPISODE_STEPS - 2
    for p, k in zip(pos, at, strict=True):
        if max(recs[0]["beliefs"][k]) < 1.0:
            got = [int(tok.id_to_token(int(ids[0, q]))) / 100 for q in p]
            assert got == [float(f"{b:.2f}") for b in recs[0]["beliefs"][k]]

    donor = donor_beliefs(ids[2, : lengths[2]], bt, spec.EPISODE_STEPS)
    p2, at2 = found[2]
    assert np.array_equal(donor[at2], ids[2][p2])
    out = blind_beliefs(ids, lengths, np.array([0]), [donor], bt, np.random.default_rng(1))
    assert np.array_equal(out[1:], ids[1:])  # rows not chosen are untouched
    for p, k in zip(pos[:-1], at[:-1], strict=True):  # the donor's belief of the same step
        assert np.array_equal(out[0, p], donor[k] if donor[k, 0] >= 0 else ids[0, p])
    assert np.array_equal(out[0, pos[-1]], ids[0, pos[-1]])  # the last belief is kept
    others = np.ones(n, dtype=bool)
    others[pos.ravel()] = False
    assert np.array_equal(out[0, others], ids[0, others])  # nothing else changes
    text = tok.decode(out[0, : lengths[0]].tolist())
    lines = [ln.split(":", 1)[1] for ln in text.splitlines() if ln.split(":")[0] in spec.SLOTS]
    for k in (0, 10, 26):  # the week reads as a valid week with the donor's beliefs
        got = parse_output(" ".join(lines[k].split()[:2]))
        assert got.action_id == recs[0]["actions"][k]
        if max(recs[2]["beliefs"][k]) < 1.0:
            assert np.allclose(got.belief, recs[2]["beliefs"][k])
