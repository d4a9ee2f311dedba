"""The person's Bayesian belief from their slot records and answers, in ONE pass.

The records go in, in order (``rhythm.derive.observation_records``: this week and the
``HISTORY_WEEKS`` before it), and each answer once its slot has passed, as the training
weeks' teacher reads them (``training.realshape.StreamTeacher``); the answers left over
(later slots, and answers stored before their slot was kept) go in after the last record.
The pass gives the belief the day planner plans with and, when asked for a week, what the
filter believed before each slot of that week: the v4 prompt's ``b`` lines
(``agent.prompting.filter_line``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np

from common.records import ACTIONS, METERS, SLOTS
from mapping.observations import belief_view

# Meters computed from real data are much noisier than the simulator's 0.012 per step.
REAL_NOISE_SD = 0.08

Records = list[tuple[dict[str, Any], dict[str, Any]]]


@dataclass
class FilterPass:
    """What one pass of the filter gives: the belief after every record and answer, how
    many records carried meter data, and (for ``week_start``) the filter before each slot of
    that week: step -> median and sd of the three traits, then the slot's filled meters."""

    belief: Any
    observed: int
    filters: dict[int, list[float]] = field(default_factory=dict)


def new_filter() -> Any:
    """The product's belief filter, before any record."""
    from agent.belief import BeliefState

    # real deltas are noisy; weeks of answers need more importance samples than a simulated
    # week (min_ess: docs/agent.md section 7). The simulator's noisy-readings filter
    # (meter_obs_sd) is not used: real meters are scores against the person's usual, not
    # noisy readings of the simulator's levels (issue 21 decides how the two meet).
    return BeliefState(noise_sd=REAL_NOISE_SD, min_ess=100)


def observe_answer(belief: Any, fb: dict[str, Any]) -> None:
    """One stored answer (``storage.plans.answers``) into the belief."""
    if fb["action"] not in ACTIONS:
        return
    a, accepted = ACTIONS.index(fb["action"]), fb["response"] == "accept"
    # an answer read from the data counts by its confidence (tempered likelihood); typed: 1
    w = float(fb.get("confidence", 1.0)) if fb.get("source", "explicit") != "explicit" else 1.0
    m = fb.get("meters_before")
    if isinstance(m, list) and len(m) == len(METERS) and fb["slot"] in SLOTS:
        # the answer model (feedback.md): p(accept | who they are, the meters then, slot, action)
        belief.observe_answer([np.nan if v is None else float(v) for v in m], SLOTS.index(fb["slot"]), a,
                              accepted, weight=w)
    else:  # an answer to a recommendation stored before its meters were kept
        belief.observe_feedback(a, accepted, weight=w)


def run_filter(records: Records, feedback: list[dict[str, Any]], week_start: date | None = None) -> FilterPass:
    """The one pass (module docstring). ``records``: (observation, info) oldest first;
    ``feedback``: the stored answers; ``week_start``: the Monday whose slots get a filter
    line (None: no lines, the belief alone)."""
    from agent.belief import filter_belief

    belief = new_filter()
    pending = sorted(
        (k for k, fb in enumerate(feedback) if fb.get("slot") in SLOTS),
        key=lambda k: (feedback[k]["local_day"], SLOTS.index(feedback[k]["slot"])),
    )
    done: set[int] = set()
    filters: dict[int, list[float]] = {}
    observed = j = 0
    for obs, info in records:
        here = (date.fromisoformat(info["local_day"]), SLOTS.index(info["slot_name"]))
        while j < len(pending) and (feedback[pending[j]]["local_day"], SLOTS.index(feedback[pending[j]]["slot"])) < here:
            observe_answer(belief, feedback[pending[j]])
            done.add(pending[j])
            j += 1
        prev = info.get("previous")
        if prev and any(prev["observed"]):
            observed += 1
        belief.update_from_observation(belief_view(obs, info))
        if week_start is not None and here[0] >= week_start:
            filters[int(obs["t"])] = filter_belief(belief, obs["meters"])  # the filled meters the plan starts from
    for k, fb in enumerate(feedback):
        if k not in done:
            observe_answer(belief, fb)
    return FilterPass(belief, observed, filters)


def person_belief(records: Records, feedback: list[dict[str, Any]]) -> tuple[Any, int]:
    """The belief about the person after their slot ``records`` and answers, and how many
    records carried meter data (:func:`run_filter`). Shared by the plan and ``rhythm train
    refine``."""
    done = run_filter(records, feedback)
    return done.belief, done.observed


def person_filters(records: Records, feedback: list[dict[str, Any]], week_start: date) -> dict[int, list[float]]:
    """What the filter believed of the person before each slot of the week from
    ``week_start`` (the v4 prompt's ``b`` lines, :func:`run_filter`)."""
    return run_filter(records, feedback, week_start).filters
