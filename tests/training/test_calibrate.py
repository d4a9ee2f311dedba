"""The action bias stage (training/calibrate.py): the fits recover a known lean, and the
stage end to end on the shipped real-days student writes a GGUF whose bias llama.cpp applies."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulator import spec
from training.calibrate import fit_counts, fit_nll, judge, softmax_nll


def leaning_scores(n: int = 30000, seed: int = 0):
    """Teacher actions drawn from softmax(true logits); the model's logits are the true ones
    minus a known lean (mean 0): ``(model_logits, teacher, lean)``."""
    rng = np.random.default_rng(seed)
    true = rng.normal(0.0, 2.0, (n, spec.N_ACTIONS)) + np.linspace(1.0, -1.0, spec.N_ACTIONS)
    p = np.exp(true - true.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    lean = rng.normal(0.0, 0.6, spec.N_ACTIONS)
    lean -= lean.mean()
    return true - lean, y, lean


def test_nll_fit_recovers_the_lean_and_lowers_the_cross_entropy():
    z, y, lean = leaning_scores()
    b = fit_nll(z, y, l2=0.0)
    assert abs(b.mean()) < 1e-9
    assert np.abs(b - lean).max() < 0.08  # the offset that undoes the lean, up to sampling
    assert softmax_nll(z, y, b) < softmax_nll(z, y, np.zeros_like(b)) - 0.01
    # at the optimum the mean predicted probability of each action is its teacher share
    q = np.exp(z + b - (z + b).max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    assert np.allclose(q.mean(axis=0), np.bincount(y, minlength=spec.N_ACTIONS) / len(y), atol=1e-4)
    # the penalty shrinks the offsets toward 0
    assert np.abs(fit_nll(z, y, l2=1.0)).max() < 0.5 * np.abs(b).max()


def test_nll_fit_of_a_peaked_model_within_a_bound_is_never_worse_than_no_offset():
    """A confident model (large logit gaps, some actions never chosen by the teacher): the
    offsets stay within the bound and lower the cross-entropy; plain Newton steps once went
    far off here, and clipping them made it worse than no offset."""
    z, y, _ = leaning_scores(seed=2)
    z = 25.0 * z
    y = np.where(y >= 8, 0, y)  # the teacher never picks the last two actions
    before = softmax_nll(z, y, np.zeros(spec.N_ACTIONS))
    for l2 in (0.0, 0.01):
        b = fit_nll(z, y, l2=l2, bound=2.0)
        assert np.abs(b).max() <= 2.0 + 1e-12
        assert softmax_nll(z, y, b) + l2 * float(b @ b) <= before


def test_counts_fit_brings_each_greedy_count_to_the_teachers():
    z, y, _ = leaning_scores(seed=1)
    want = np.bincount(y, minlength=spec.N_ACTIONS)
    before = np.bincount(z.argmax(axis=1), minlength=spec.N_ACTIONS)
    after = np.bincount((z + fit_counts(z, y)).argmax(axis=1), minlength=spec.N_ACTIONS)
    assert np.abs(before - want).max() > 0.05 * len(y)  # the lean shows in the counts
    assert np.abs(after - want).max() < 0.01 * len(y)
    r = judge(z, y, np.zeros(spec.N_ACTIONS), list(spec.ACTIONS))
    assert sum(r["counts"].values()) == r["decisions"] == len(y)
    assert r["agreement"] == pytest.approx(float((z.argmax(axis=1) == y).mean()))


def test_greedy_over_chooses_what_sampling_does_not():
    """A model that knows the teacher's odds exactly: drawing from them reproduces the
    teacher's counts, taking the likeliest pick agrees more often and over-chooses it."""
    rng = np.random.default_rng(3)
    n = 20_000
    # two regions: in one (70% of decisions) the teacher picks LEARN 65% of the time,
    # MEDITATE 35%; in the other MEDITATE 60%, LEARN 40%; every other action rare
    first = rng.random(n) < 0.7
    p = np.full((n, spec.N_ACTIONS), 1e-4)
    learn, med = spec.ACTIONS.index("LEARN"), spec.ACTIONS.index("MEDITATE")
    p[first, learn], p[first, med] = 0.65, 0.35
    p[~first, learn], p[~first, med] = 0.40, 0.60
    p /= p.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(spec.N_ACTIONS, p=row) for row in p])
    r = judge(np.log(p), y, np.zeros(spec.N_ACTIONS), list(spec.ACTIONS))
    teacher = np.bincount(y, minlength=spec.N_ACTIONS)
    assert r["sampled"]["counts"]["LEARN"] == pytest.approx(teacher[learn], rel=0.03)
    assert r["sampled"]["counts"]["MEDITATE"] == pytest.approx(teacher[med], rel=0.03)
    assert r["counts"]["LEARN"] > 1.15 * teacher[learn]  # greedy: every first-region decision
    assert r["agreement"] == pytest.approx(0.7 * 0.65 + 0.3 * 0.60, abs=0.015)
    assert r["sampled"]["agreement"] == pytest.approx(0.7 * (0.65**2 + 0.35**2) + 0.3 * (0.4**2 + 0.6**2), abs=0.015)
    assert r["agreement"] > r["sampled"]["agreement"] + 0.07


@pytest.mark.ml
def test_calibrate_stage_on_the_shipped_student(tmp_path):
    """Teacher weeks shaped like the product's -> a v4 dataset in the shipped student's
    tokenizer -> the stage: its report counts every decision, the fit lowers the cross-entropy
    of the weeks it was fitted on, and the GGUF it writes carries the bias llama.cpp reads."""
    from pathlib import Path

    import rhythm
    from agent.runtime import LlamaCppModel
    from training import calibrate, dataset, rollouts
    from training.checkpoints import load_gguf_student

    shipped = Path(rhythm.__file__).parent / "models" / "student-real-q8_0.gguf"
    rollouts.main(rollouts.Args(out=str(tmp_path / "rollouts"), episodes=6, seed_start=7_900_000,
                                shaped=True, product_share=0.5, workers=1))
    _, tok = load_gguf_student(shipped)
    tok.post_processor = None
    tok.save(str(tmp_path / "tokenizer.json"))
    dataset.main(dataset.Args(rollouts=[str(tmp_path / "rollouts" / "rollouts.jsonl")],
                              out=str(tmp_path / "data"), tokenizer=str(tmp_path / "tokenizer.json"),
                              prompt_format="rhythm v4", val_fraction=0.3))
    with pytest.raises(ValueError, match="objective"):
        calibrate.main(calibrate.Args(model=str(shipped), data=str(tmp_path / "data"), out=str(tmp_path / "x"),
                                      objective="mode"))
    report = calibrate.main(calibrate.Args(model=str(shipped), data=str(tmp_path / "data"),
                                           out=str(tmp_path / "cal"), check_share=0.34, seed=3))
    recs = [json.loads(x) for x in (tmp_path / "rollouts" / "rollouts.jsonl").read_text().splitlines()]
    answers = sum(a is not None for r in recs for a in r["answers"])
    fit, check = report["fit"]["before"], report["before"]
    assert fit["decisions"] + check["decisions"] == answers
    assert sum(report["teacher_counts"].values()) == check["decisions"] > 0
    assert report["fit"]["after"]["nll"] <= fit["nll"]
    assert max(abs(v) for v in report["bias"].values()) <= 2.0
    saved = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert saved["bias"] == report["bias"]
    assert (tmp_path / "cal" / "calibration.png").stat().st_size > 0
    model = LlamaCppModel(report["gguf"])
    assert model.prompt_format == LlamaCppModel(shipped).prompt_format  # the base's format, kept
    assert model.action_bias() == pytest.approx({a: v for a, v in report["bias"].items()})

    # the saved scores fit again without scoring, to the same offsets; another model's refused
    scores = str(tmp_path / "cal" / "scores.npz")
    again = calibrate.main(calibrate.Args(model=str(shipped), data=str(tmp_path / "data"), out=str(tmp_path / "again"),
                                          check_share=0.34, seed=3, scores=scores))
    assert again["bias"] == report["bias"] and again["before"] == report["before"]
    with pytest.raises(ValueError, match="scored another model"):
        calibrate.main(calibrate.Args(model=report["gguf"], data=str(tmp_path / "data"), out=str(tmp_path / "other"),
                                      scores=scores))
