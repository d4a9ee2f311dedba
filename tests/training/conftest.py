"""Shared by the training stage tests: three teacher weeks (the heuristic's, no beliefs) and
a helper that gives a week random two-decimal beliefs."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.env import RhythmEnv
from simulator.policies import HeuristicPolicy
from training.rollouts import play_episode


@pytest.fixture(scope="module")
def records():
    env = RhythmEnv()
    return [play_episode(HeuristicPolicy(), env, s, "heuristic", "in-dist") for s in (11, 12, 13)]


def _with_beliefs(rec, rng):
    rec = dict(rec)
    rec["beliefs"] = [list(np.round(rng.uniform(0, 1, 3), 2)) for _ in rec["actions"]]
    return rec


@pytest.fixture
def with_beliefs():
    """``with_beliefs(rec, rng)``: a copy of the week with a random belief at every step."""
    return _with_beliefs
