"""benchmarks/overchoice.py: decisions mapped to their slot of the week, offsets fitted per
group, the over-choice counts, on made-up scores that can be checked by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from simulator import spec

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("overchoice", ROOT / "benchmarks" / "overchoice.py")
overchoice = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("overchoice", overchoice)
_spec.loader.exec_module(overchoice)


def test_each_decision_gets_the_step_of_its_answer():
    answers = [None] * spec.EPISODE_STEPS
    answers[5] = answers[9] = {"action": 2}
    episodes = {11: {"answers": answers}, 12: {"answers": [None] * 27 + [{"action": 0}]}}
    weeks = np.array([0, 0, 1, 2, 2])
    steps = overchoice.decision_steps(weeks, [11, 12, 99], episodes)
    assert steps.tolist() == [5, 9, 27, -1, -1]  # seed 99 has no episode
    # an episode whose answers do not line up with the scores is not guessed at
    assert overchoice.decision_steps(np.array([0, 0, 0]), [11], episodes).tolist() == [-1, -1, -1]


def test_an_offset_per_group_removes_a_lean_that_lives_in_one_group():
    rng = np.random.default_rng(0)
    n = 6000
    groups = (rng.random(n) < 0.6).astype(int)  # group 1 the larger: LEARN comes out over-chosen
    learn, med = spec.ACTIONS.index("LEARN"), spec.ACTIONS.index("MEDITATE")
    y = np.where(rng.random(n) < 0.5, learn, med)
    logits = np.full((n, spec.N_ACTIONS), -6.0)
    logits[np.arange(n), y] = 1.0  # a model that knows the answer ...
    logits[groups == 1, learn] += 7.5  # ... except that in group 1 it always says LEARN
    logits[groups == 0, med] += 7.5  # and in group 0 always MEDITATE: no single offset fixes both
    fit = rng.random(n) < 0.5
    base = logits.argmax(axis=1)
    only_model, only_teacher = overchoice.over_chosen(base[~fit], y[~fit])["LEARN"]
    assert only_teacher > 0 and only_model > 0 and only_model == ((groups == 1) & (y == med) & ~fit).sum()
    one = (logits + overchoice.group_offsets(logits, y, np.zeros(n, int), fit, 1e-3)).argmax(axis=1)
    per = (logits + overchoice.group_offsets(logits, y, groups, fit, 1e-3)).argmax(axis=1)
    won_one, _ = overchoice.won_lost(base[~fit], one[~fit], y[~fit])
    won_per, lost_per = overchoice.won_lost(base[~fit], per[~fit], y[~fit])
    assert won_per > won_one + 500 and lost_per == 0
    assert (per[~fit] == y[~fit]).all()
    assert overchoice.over_chosen(per[~fit], y[~fit]) == {}
