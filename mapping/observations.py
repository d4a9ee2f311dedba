"""A real person's days as the simulator's observations (simulator spec section 6).

``observations_from_states(states, start, end)`` returns one (observation, info) per slot
of the days [start, end], in order, each observation a dict with exactly the keys, types
and shapes of ``simulator.env.RhythmEnv``'s observation, so the same agent serves simulated
and real people. Pure: the app shell loads the stored slots (``states_from_rows``):

    t, day, slot, remaining_steps          (t = weekday * 4 + slot, day = weekday: 0 Monday)
    meters (5,)                            the meters of the slot just finished
    deltas (5,)                            meters of that slot minus the slot before
    anomalies (5,)                         deltas minus simulator.dynamics.neutral_delta(...)
    last_action                            the action of the slot just finished (10 = unknown)
    last_reward (1,)                       spec 5 reward with neutral (uniform) weights
    active_event                           0 (no event detection on real data yet)
    history_actions (7,), history_rewards (7,), history_deltas (7, 5)
                                           the 7 slots before, oldest first, padded like the env

As in the env, the observation at a slot describes the state *before* acting in it: the
observation for (day, morning) shows the meters of the night before. The meters come from the
``meters`` table (run ``rhythm map`` first); the app shell computes them on the fly
(read-only) when the range has no stored rows.

Real meters can be missing. The observation needs numbers, so a missing meter carries the
last known value of that meter forward, else 0.5 ("usual for you"); next to each
observation comes an ``info`` dict saying which meters were observed, the
confidences and the local day and slot, so a consumer can tell filled values from data.
An unknown action leaves the anomalies at 0 (nothing to compare against).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import numpy as np

from common.records import ACTIONS, SLOTS
from common.rows import SlotRow
from mapping.rules import METERS
from simulator import spec
from simulator.dynamics import neutral_delta, reward_terms

HISTORY = 7
NO_ACTION = len(ACTIONS)  # 10, as the env's "none yet"
NEUTRAL_W = (0.2, 0.2, 0.2, 0.2, 0.2)
FILL = 0.5
LOOKBACK_DAYS = 3  # slots before the range feed the first observations' deltas and history
REWARD_BOUND = 20.0


@dataclass(frozen=True)
class SlotState:
    """One stored slot: meters (None = missing), action and confidences."""

    day: date
    slot: int
    meters: tuple[float | None, ...]
    meter_confidence: float = 0.0
    action: str | None = None
    action_confidence: float = 0.0


def _reward(delta: np.ndarray, after: np.ndarray) -> tuple[float, dict[str, float]]:
    terms = reward_terms(NEUTRAL_W, delta, after)
    total = (((terms["delta"] + terms["level"]) + terms["progress"]) + terms["connection"]) + terms["crash"]
    return float(np.clip(total, -REWARD_BOUND, REWARD_BOUND)), terms


def observations_from_states(
    states: list[SlotState], start: date, end: date
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pure: (observation, info) per slot of [start, end] from the stored slot states.

    ``states`` may include slots before ``start`` (they feed the first deltas and history);
    slots with no state count as all-missing with no action.
    """
    by_key = {(s.day, s.slot): s for s in states}
    first = min([start, *(s.day for s in states)])
    seq: list[SlotState] = []
    d = first
    while d <= end:
        for k in range(len(SLOTS)):
            seq.append(by_key.get((d, k), SlotState(d, k, (None,) * len(METERS))))
        d += timedelta(days=1)

    # Filled meter vectors (carry forward, else 0.5) and per-step deltas, rewards, anomalies.
    filled = np.empty((len(seq), len(METERS)))
    last = np.full(len(METERS), FILL)
    for i, st in enumerate(seq):
        cur = np.array([last[j] if v is None else float(v) for j, v in enumerate(st.meters)])
        filled[i] = np.clip(cur, 0.0, 1.0)
        last = filled[i]
    steps = []  # per index i: (action id, reward, delta, anomaly, terms) of the step ending at i
    for i, st in enumerate(seq):
        before = filled[i - 1] if i > 0 else filled[i]
        delta = np.clip(filled[i] - before, -1.0, 1.0)
        a = NO_ACTION if st.action is None else ACTIONS.index(st.action)
        if a == NO_ACTION or i == 0:
            anomaly = np.zeros(len(METERS))
        else:
            anomaly = np.clip(delta - neutral_delta(before, st.slot, a, None), -2.0, 2.0)
        r, terms = _reward(delta, filled[i])
        steps.append((a, r, delta, anomaly, terms))

    out = []
    for i, st in enumerate(seq):
        if st.day < start:
            continue
        weekday = st.day.weekday()
        t = weekday * len(SLOTS) + st.slot
        if i > 0:
            a, r, delta, anomaly, terms = steps[i - 1]
            prev = seq[i - 1]
            meters = filled[i - 1]
        else:
            a, r, delta, anomaly, terms = NO_ACTION, 0.0, np.zeros(5), np.zeros(5), {}
            prev = None
            meters = filled[0]
        hist = steps[max(0, i - HISTORY) : i]
        pad = HISTORY - len(hist)
        obs = {
            "t": t,
            "day": weekday,
            "slot": st.slot,
            "remaining_steps": spec.EPISODE_STEPS - t,
            "meters": np.array(meters, dtype=np.float64),
            "deltas": np.array(delta, dtype=np.float64),
            "anomalies": np.array(anomaly, dtype=np.float64),
            "last_action": int(a),
            "last_reward": np.array([r], dtype=np.float64),
            "active_event": 0,
            "history_actions": np.array([NO_ACTION] * pad + [h[0] for h in hist], dtype=np.int64),
            "history_rewards": np.array([0.0] * pad + [h[1] for h in hist], dtype=np.float64),
            "history_deltas": np.array(
                [[0.0] * len(METERS)] * pad + [list(h[2]) for h in hist], dtype=np.float64
            ).reshape(HISTORY, len(METERS)),
        }
        info = {
            "local_day": st.day.isoformat(),
            "slot_name": SLOTS[st.slot],
            "previous": None
            if prev is None
            else {
                "local_day": prev.day.isoformat(),
                "slot_name": SLOTS[prev.slot],
                "observed": [v is not None for v in prev.meters],
                "meter_confidence": prev.meter_confidence,
                "action": prev.action,
                "action_confidence": prev.action_confidence,
            },
            "reward_breakdown": terms,
        }
        out.append((obs, info))
    return out


def states_from_rows(rows: Iterable[SlotRow]) -> list[SlotState]:
    """Stored slots (storage.derived.slot_rows, or freshly computed ones) as SlotStates."""
    states = []
    for r in rows:
        if r.slot not in SLOTS:
            continue
        states.append(
            SlotState(r.day, SLOTS.index(r.slot), tuple(r.meters), float(r.confidence or 0.0),
                      r.action if r.action in ACTIONS else None, float(r.action_confidence or 0.0))
        )
    return states


def lookback_start(start: date) -> date:
    """The first day whose stored slots feed the observations of days from ``start``."""
    return start - timedelta(days=LOOKBACK_DAYS)


def to_jsonable(obs: dict[str, Any]) -> dict[str, Any]:
    """An observation with arrays as lists (for --json and logs)."""
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in obs.items()}


def dumps(obs: dict[str, Any]) -> str:
    return json.dumps(to_jsonable(obs))


def belief_view(obs: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """The observation as the belief should read it: the deltas of meters not observed in the
    slot just finished NaN (the belief skips them), and the reward NaN unless every meter
    was (a reward over filled meters says nothing of the reward weights). Used by
    ``rhythm recommend`` and, for the same view in training, ``training.realshape``."""
    prev = info.get("previous")
    if not prev:
        return obs
    observed = np.array(prev["observed"], dtype=bool)
    if observed.all():
        return obs
    out = dict(obs)
    d = np.array(obs["deltas"], dtype=np.float64)
    d[~observed] = np.nan
    out["deltas"] = d
    out["last_reward"] = np.array([np.nan])
    return out
