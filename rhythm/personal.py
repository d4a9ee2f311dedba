"""The person's own dynamics from their stored slots: the glue between storage and
``agent.personal`` (pure). Storage reads the meters and slot actions, the agent fits them;
`rhythm meters --fit` shows the fit and `rhythm recommend` plans with it."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import numpy as np

from common.records import ACTIONS, METERS, SLOTS
from storage import derived
from storage.db import Database

#: Days of history a fit uses (the meters are scored against a 28-day baseline, so older
#: days still say how the person moves, but habits change).
FIT_DAYS = 180


def slot_meters(db: Database, end: date | None = None, days: int = FIT_DAYS) -> list[Any]:
    """The stored slots of ``days`` days ending at ``end`` as ``agent.personal.SlotMeters``."""
    from agent.personal import SlotMeters

    return [
        SlotMeters(r.day, SLOTS.index(r.slot), tuple(r.meters),
                   ACTIONS.index(r.action) if r.action in ACTIONS else None)
        for r in derived.slot_history(db, end, days) if r.slot in SLOTS
    ]


def personal_dynamics(db: Database, before: date) -> Any:
    """The person's dynamics fitted on their slots of the ``FIT_DAYS`` days before ``before``
    (the prior when there are too few)."""
    from agent.personal import fit_personal, transitions

    return fit_personal(transitions(slot_meters(db, before - timedelta(days=1))))


def fit_report(db: Database, end: date | None = None, days: int = FIT_DAYS) -> dict[str, Any]:
    """What `rhythm meters --fit` shows: the fit on every stored slot of the window, each
    action's fitted effect (its own slot averaged, plus what it carries into the next
    morning) against the table's with its sd, how many steps back it, which depart, and the
    one-step error of the three predictors on the last quarter of the days (fitted on the
    earlier ones)."""
    from agent.personal import MIN_TRANSITIONS, fit_personal, heldout_errors, transitions

    slots = slot_meters(db, end, days)
    steps = transitions(slots)
    fit = fit_personal(steps)
    held = heldout_errors(slots)
    dep, sd = fit.departure()
    table = fit.table.mean(axis=0)
    ok = fit.supported()
    effects = []
    for a, name in enumerate(ACTIONS):
        n = int(fit.n_obs[a] + fit.n_carry[a])
        if n == 0:
            continue
        effects.append({
            "action": name, "steps": int(fit.n_obs[a]), "mornings_after": int(fit.n_carry[a]),
            "support": int(fit.support[a]),
            "effect": {m: round(float(table[a, k] + dep[a, k]), 4) for k, m in enumerate(METERS)},
            "sd": {m: round(float(sd[a, k]), 4) for k, m in enumerate(METERS)},
            "table": {m: round(float(table[a, k]), 4) for k, m in enumerate(METERS)},
            "departs": [m for k, m in enumerate(METERS) if ok[a, k]],
        })
    days_seen = sorted({s.day for s in slots})
    return {
        "fitted": fit.fitted,
        "transitions": fit.n_transitions,
        "min_transitions": MIN_TRANSITIONS,
        "first_day": days_seen[0].isoformat() if days_seen else None,
        "last_day": days_seen[-1].isoformat() if days_seen else None,
        "kappa": fit.kappa,
        "pull_to_usual": {SLOTS[s]: {m: round(float(fit.reversion[s, k]), 3) for k, m in enumerate(METERS)}
                          for s in range(len(SLOTS))},
        "noise_sd": {SLOTS[s]: {m: round(float(fit.sigma[s, k]), 4) for k, m in enumerate(METERS)}
                     for s in range(len(SLOTS))},
        "effects": effects,
        "heldout": {
            "test_from": held.test_from.isoformat() if held.test_from else None,
            "train_steps": held.train_steps, "test_steps": held.test_steps,
            "mae": {p: (None if not np.isfinite(v) else round(v, 4)) for p, (v, _n) in held.errors.items()},
            "components": {p: n for p, (_v, n) in held.errors.items()},
        },
    }
