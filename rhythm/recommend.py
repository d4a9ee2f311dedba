"""`rhythm recommend` and `rhythm feedback`: the shell around the day planner.

Load, plan, ask, store (STYLE rule 17); how a day is planned is ``agent.day`` (pure):

1. load (``rhythm.day_inputs``): the person's recent slots as simulator observations (this
   week and two before it, masked where a meter was not observed), their answers, the
   calendar around the day, their recent nights, daily numbers, actions and own dynamics;
2. one pass of the Bayesian filter (``rhythm.belief_filter``) over those slots and answers:
   the belief about who they are and, when a local model is asked, the filter before each
   slot of the week (the v4 prompt's ``b`` lines);
3. plan (``rhythm.plan_day``): ``agent.day.DayPlanner``: commitments, fixed slots, one time
   block per open slot with evidence and expected effect;
4. ask (``rhythm.ask_model``): where a local model is configured or bundled, it chooses the
   current slot's action (its output constrained by a grammar; calendar events reach it only
   as their classified action and time, never their titles), and the planner's checks
   accept or refuse it;
5. store (``rhythm.store_plan``): every block in `recommendations` with its times, evidence,
   expected effect, the belief and the meters it was given with.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from common.errors import ConfigError, RhythmError
from mapping.labels import unlabelled_titles
from rhythm.ask_model import (
    BUNDLED_MODEL,
    PRODUCT_MODEL,
    REFINED_MODEL,
    Asked,
    ask_model,
    bundled_model_path,
    choose_backend,
    fixed_lines,
    model_prompt,
    no_model_note,
    product_model_path,
    refined_model_path,
    week_fixed,
)
from rhythm.belief_filter import (
    REAL_NOISE_SD,
    FilterPass,
    person_belief,
    person_filters,
    run_filter,
)
from rhythm.day_inputs import (
    FACTS_DAYS,
    HISTORY_WEEKS,
    NIGHTS_DAYS,
    DayData,
    calendar_events,
    load_day,
    main_nights,
)
from rhythm.plan_day import dynamics_note, plan_day
from rhythm.settings import Settings
from rhythm.store_plan import Plan, PlannedSlot, store_plan
from storage import plans
from storage.db import Database

__all__ = [
    "BUNDLED_MODEL", "FACTS_DAYS", "HISTORY_WEEKS", "NIGHTS_DAYS", "PRODUCT_MODEL", "REAL_NOISE_SD", "REFINED_MODEL",
    "Asked", "DayData", "FilterPass", "Plan", "PlannedSlot", "bundled_model_path", "calendar_events",
    "choose_backend", "fixed_lines", "load_day", "main_nights", "make_plan", "model_prompt", "person_belief",
    "person_filters", "product_model_path", "record_answer", "refined_model_path", "run_filter", "week_fixed",
]


def make_plan(db: Database, settings: Settings, day: date | None = None, now: datetime | None = None) -> Plan:
    """Plan the rest of `day` (default: the current local day) as time blocks and store it
    (inside the caller's transaction: ``rhythm.jobs.recommend``)."""
    from agent.day import PLANNER_NAME

    backend, model_path = choose_backend(settings)
    data = load_day(db, settings, day, now)
    # one pass of the filter: the belief, and the filter before each slot of the week for the model
    belief = run_filter(data.records, data.feedback, data.week_start if backend == "llm" else None)
    notes: list[str] = []
    if belief.observed == 0:
        notes.append("no meter data yet: the plan rests on the prior (import data, then `rhythm map`)")
    if note := dynamics_note(data):
        notes.append(note)
    planner, dp = plan_day(data, belief.belief)
    notes.extend(dp.notes)
    if note := unlabelled_note(db, data.day):
        notes.append(note)
    asked = Asked()
    if backend == "llm":
        if model_path is None:  # pragma: no cover - choose_backend gives llm only with a path
            raise RhythmError("no model to ask")
        asked = ask_model(db, model_path, data, belief.filters, planner, dp)
        notes.extend(asked.notes)
    elif note := no_model_note(settings):
        notes.append(note)
    return store_plan(db, data, dp, model=asked.model or PLANNER_NAME, observed=belief.observed, notes=notes,
                      picks=asked.picks)


UNLABELLED_DAYS = 3  # today and the next two days
UNLABELLED_SHOWN = 5


def unlabelled_note(db: Database, day: date) -> str | None:
    """The titles of the coming days that neither your labels nor the keyword table can
    label, and how to label them (issue 40); None when there are none."""
    from datetime import timedelta

    from rhythm.derive import label_book
    from storage import labels as stored_labels

    titles = unlabelled_titles(stored_labels.upcoming_titles(db, day, day + timedelta(days=UNLABELLED_DAYS - 1)),
                               label_book(db))
    if not titles:
        return None
    shown = ", ".join(f'"{t[:40]}"' for t in titles[:UNLABELLED_SHOWN])
    more = f" and {len(titles) - UNLABELLED_SHOWN} more" if len(titles) > UNLABELLED_SHOWN else ""
    return (f"could not label {len(titles)} title(s) in the coming days: {shown}{more}; label one with "
            f'`rhythm label "TITLE" ACTION` (an action, or NONE for not an action)')


def record_answer(db: Database, recommendation_id: int, response: str) -> dict[str, Any]:
    """Store the person's answer to a recommendation (a later answer replaces an earlier one)."""
    if response not in ("accept", "ignore"):
        raise ConfigError(f"answer must be accept or ignore, not {response!r}")
    rec = plans.recommendation(db, recommendation_id)
    if rec is None:
        raise RhythmError(f"no recommendation with id {recommendation_id} (see `rhythm recommend`)")
    at = plans.record_answer(db, recommendation_id, response)
    return {"id": recommendation_id, "local_day": rec["local_day"], "slot": rec["slot"], "action": rec["action"],
            "response": response, "at": at}
