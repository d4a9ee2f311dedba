"""The hidden-person week: a Gymnasium environment, a batch engine, baselines and evaluation.

Implements ../shared/specs/simulator.md; see docs/simulator.md. Importing this package
registers the Gymnasium id ``Rhythm-v0`` (idempotently). This package imports nothing from
the rest of the project.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from simulator import spec
from simulator.spec import ACTIONS, ENV_ID, EVENTS, METERS, SLOTS

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="simulator.env:RhythmEnv")

from simulator.dynamics import anomaly, expected_delta, neutral_delta, reward_terms, step  # noqa: E402
from simulator.env import RhythmEnv  # noqa: E402
from simulator.grader import Grade, grade  # noqa: E402
from simulator.profiles import (  # noqa: E402
    Profile,
    belief_truth,
    named_profile,
    sample_profile,
)

__all__ = [
    "ACTIONS",
    "ENV_ID",
    "EVENTS",
    "METERS",
    "SLOTS",
    "Grade",
    "Profile",
    "RhythmEnv",
    "anomaly",
    "belief_truth",
    "expected_delta",
    "grade",
    "named_profile",
    "neutral_delta",
    "reward_terms",
    "sample_profile",
    "spec",
    "step",
]
