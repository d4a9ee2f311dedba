"""Evaluation (training.student, training.belief_trace): the PyTorch student's grammar
decoding, like llama.cpp's, and the per-step belief trace."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulator import spec


@pytest.mark.ml
def test_grammar_decoder_only_allows_valid_answers(records, with_beliefs):
    from training.dataset import episode_text, train_tokenizer
    from training.student import GrammarDecoder

    rng = np.random.default_rng(2)
    tok = train_tokenizer([episode_text(with_beliefs(r, rng)) for r in records], 600)
    dec = GrammarDecoder(tok)
    (space_b,) = tok.encode(" b").ids
    (comma,) = tok.encode(",").ids
    logits = np.zeros(tok.get_vocab_size())
    logits[space_b] = 10.0  # the best token is not allowed first
    first = dec.pick("", logits)
    assert any(a.startswith(dec.strings[first]) for a in spec.ACTIONS)
    assert first != space_b and dec.allowed("SLEEP", space_b)
    assert not dec.allowed("SLEEP b=.5", comma)
    assert dec.complete("SLEEP b=.50,1.00,.07") and not dec.complete("SLEEP b=.50,1.00,.0")


@pytest.mark.ml
def test_pytorch_decoder_takes_the_median_belief_number_like_llama_cpp(records, with_beliefs):
    from training.dataset import episode_text, train_tokenizer
    from training.student import GrammarDecoder

    rng = np.random.default_rng(4)
    numbers = " ".join(f".{k:02d}" for k in range(100))
    tok = train_tokenizer(
        [episode_text(with_beliefs(r, rng)) for r in records] + [numbers] * 20, 700
    )
    dec = GrammarDecoder(tok)
    assert dec.digits is not None
    logits = np.full(tok.get_vocab_size(), -30.0)
    logits[dec.digits[5]] = np.log(0.4)  # the mode
    logits[dec.digits[70:80]] = np.log(0.06)  # 60% of the mass
    assert dec.pick("SLEEP b=.", logits) == dec.digits[5]  # greedy: the mode
    assert dec.pick("SLEEP b=.", logits, belief_median=True) in set(dec.digits[70:80].tolist())
    assert dec.pick("SLEEP b=.42,.", logits, belief_median=True) in set(dec.digits[70:80].tolist())
    # not a number position: unchanged
    assert dec.pick("SLEE", logits, belief_median=True) == dec.pick("SLEE", logits)


def test_belief_trace_measures_each_step_against_the_truth(tmp_path):
    from training.belief_trace import Args, main, trace

    truth = [[0.2, 0.5, 0.9], [0.8, 0.5, 0.1]]
    weeks = []
    for t in truth:
        teacher = [[0.5, 0.5, 0.5], t, t]  # learns the person at the second step
        student = [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5], None]  # never moves, then no belief
        weeks.append({"belief_truth": t, "beliefs": teacher, "student_beliefs": student})
    tr = trace(weeks)
    assert np.allclose(tr["teacher"][0], [0.3, 0.0, 0.4]) and np.allclose(tr["teacher"][1:], 0)
    assert np.allclose(tr["student"][1], [0.3, 0.0, 0.4]) and np.isnan(tr["student"][2]).all()
    assert np.allclose(tr["constant"], [0.3, 0.0, 0.4])  # the median of two is their middle
    assert np.allclose(tr["student_change"][0], 0.0)
    path = tmp_path / "weeks.jsonl"
    path.write_text("\n".join(json.dumps(w) for w in weeks) + "\n")
    out = main(Args(weeks=str(path), out=str(tmp_path / "trace")))
    assert (out / "trace.png").stat().st_size > 0
    rows = (out / "trace.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 and rows[0].startswith("step,student_social")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["teacher_belief_mae"] == 0.0
    with pytest.raises(ValueError, match="no weeks"):
        trace([])
