"""The hidden-person week: a Gymnasium environment, a batch engine, baselines and evaluation.

Implements ../shared/specs/simulator.md (see docs/simulator.md). Importing this package
registers the Gymnasium id ``Rhythm-v0`` (idempotently). It imports nothing from the rest of
the project: only numpy, gymnasium and the standard library.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from simulator import spec
from simulator.spec import ACTIONS, ENV_ID, EVENTS, METERS, SLOTS

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="simulator.env:RhythmEnv")

from simulator.batch import BatchEnv, unbatch_obs  # noqa: E402
from simulator.dynamics import (  # noqa: E402
    anomaly,
    expected_delta,
    neutral_delta,
    reward,
    reward_terms,
    step,
)
from simulator.env import RhythmEnv  # noqa: E402
from simulator.evaluate import PUBLISHED, EvalResult, evaluate, evaluate_all, rollout  # noqa: E402
from simulator.grader import Grade, grade, grade_batch  # noqa: E402
from simulator.policies import (  # noqa: E402
    Policy,
    get_policy,
    policy_names,
    register_policy,
)
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
    "PUBLISHED",
    "SLOTS",
    "BatchEnv",
    "EvalResult",
    "Grade",
    "Policy",
    "Profile",
    "RhythmEnv",
    "anomaly",
    "belief_truth",
    "evaluate",
    "evaluate_all",
    "expected_delta",
    "get_policy",
    "grade",
    "grade_batch",
    "named_profile",
    "neutral_delta",
    "policy_names",
    "register_policy",
    "reward",
    "reward_terms",
    "rollout",
    "sample_profile",
    "spec",
    "step",
    "unbatch_obs",
]
