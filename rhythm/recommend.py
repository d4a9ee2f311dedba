"""`rhythm recommend` and `rhythm feedback`: the plan for the rest of the day.

One unit of work, shared by the CLI, the daemon's morning run and the demo:

1. the person's recent days as simulator observations (mapping.observations: this week and
   two weeks before it, masked where a meter was not observed),
2. the Bayesian belief over who they are (agent.belief), with the accept/ignore history as
   weak evidence,
3. a plan for the remaining slots of the day: the Bayesian planner (agent.planner), or, when
   a local model is configured or bundled, the language model for the current slot (its
   output constrained by a grammar to an action and a belief) with the planner for the rest,
4. stored in `recommendations`, one row per slot, with the belief and a short reason.

Imported text (calendar titles) reaches the model only as quoted, sanitised context; the
grammar fixes what it can output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import ConfigError, ModelError, RhythmError
from common.records import ACTIONS, SLOTS
from common.timeutil import slot_of
from rhythm.derive import observation_records
from rhythm.settings import Settings, local_now, user_zone
from storage import inputs, plans
from storage.db import Database

# Meters computed from real data are much noisier than the simulator's 0.012 per step.
REAL_NOISE_SD = 0.08
HISTORY_WEEKS = 2  # earlier weeks fed to the belief before this week's slots
BUNDLED_MODEL = "student-q8_0.gguf"
BAYES_MODEL = "bayes-v1"


@dataclass(frozen=True)
class PlannedSlot:
    id: int
    local_day: date
    slot: str
    action: str
    rationale: str
    model: str


@dataclass(frozen=True)
class Plan:
    day: date
    slots: list[PlannedSlot]
    belief: tuple[float, float, float]
    belief_sd: tuple[float, float, float]
    model: str
    observed_slots: int  # slots with real meter data behind the belief
    feedback_used: int
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The plan as plain data for logs, the daemon's state and the demo's JSON."""
        belief, sd = list(self.belief), list(self.belief_sd)
        return {
            "day": self.day.isoformat(),
            "model": self.model,
            "belief": belief,
            "belief_sd": sd,
            "observed_slots": self.observed_slots,
            "notes": list(self.notes),
            "slots": [
                {"id": s.id, "slot": s.slot, "action": s.action, "rationale": s.rationale, "model": s.model,
                 "belief": belief, "belief_sd": sd}
                for s in self.slots
            ],
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "day": self.day.isoformat(),
            "model": self.model,
            "belief": dict(zip(("social", "morning", "work"), self.belief, strict=True)),
            "belief_sd": dict(zip(("social", "morning", "work"), self.belief_sd, strict=True)),
            "observed_slots": self.observed_slots,
            "feedback_used": self.feedback_used,
            "notes": self.notes,
            "slots": [
                {"id": s.id, "slot": s.slot, "action": s.action, "rationale": s.rationale, "model": s.model}
                for s in self.slots
            ],
        }


def bundled_model_path() -> Path | None:
    try:
        p = resources.files("rhythm.models") / BUNDLED_MODEL
    except ModuleNotFoundError:
        return None
    return Path(str(p)) if p.is_file() else None


def choose_backend(settings: Settings) -> tuple[str, Path | None]:
    """("bayes", None) or ("llm", path): settings.agent_backend auto|bayes|llm."""
    backend = settings.agent_backend
    if backend not in ("auto", "bayes", "llm"):
        raise ConfigError(f"agent_backend must be auto, bayes or llm, not {backend!r}")
    if backend == "bayes":
        return "bayes", None
    path = settings.model_path or bundled_model_path()
    if path is None:
        if backend == "llm":
            raise ModelError("agent_backend is llm but no model: set model_path to a local GGUF file")
        return "bayes", None
    if backend == "auto" and not _llama_cpp_available():
        return "bayes", None  # the base install has no llama.cpp: the Bayesian agent serves
    if not Path(path).is_file():
        raise ModelError(f"{path}: model file not found (setting model_path)")
    return "llm", Path(path)


def _llama_cpp_available() -> bool:
    from importlib.util import find_spec

    return find_spec("llama_cpp") is not None


def _masked(obs: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """The observation with unobserved meters' deltas as NaN, so the belief skips them."""
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
    out["last_reward"] = np.array([np.nan])  # a reward over filled meters says nothing of w
    return out


def _events_context(db: Database, day: date) -> list[dict[str, Any]]:
    """The titles of the day's timed, not cancelled events (quoted context for the model)."""
    rows = [e for e in inputs.events_between(db, day, day) if e.status != "cancelled" and not e.all_day]
    return [{"title": e.title or "", "day": day.weekday()} for e in rows[:12]]


def make_plan(db: Database, settings: Settings, day: date | None = None, now: datetime | None = None) -> Plan:
    """Plan the remaining slots of `day` (default: the current local day) and store it
    (inside the caller's transaction: ``rhythm.jobs.recommend``)."""
    from agent.planner import BayesAgent  # heavy imports only when planning

    tz = user_zone(settings)
    now = local_now(settings, now)
    today, current_slot = slot_of(now.replace(tzinfo=None))
    day = day or today
    first_slot = current_slot if day == today else 0
    backend, model_path = choose_backend(settings)
    notes: list[str] = []

    week_start = day - timedelta(days=day.weekday())
    start = week_start - timedelta(weeks=HISTORY_WEEKS)
    records = [
        (o, i)
        for o, i in observation_records(db, start, day, tz=tz)
        if (date.fromisoformat(i["local_day"]), SLOTS.index(i["slot_name"])) <= (day, first_slot)
    ]
    if not records:
        raise RhythmError(f"no slots to plan for {day}")
    agent = BayesAgent(noise_sd=REAL_NOISE_SD)
    belief = agent.belief_state
    observed = 0
    for obs, info in records:
        prev = info.get("previous")
        if prev and any(prev["observed"]):
            observed += 1
        belief.update_from_observation(_masked(obs, info))
    feedback = plans.answers(db)
    for fb in feedback:
        if fb["action"] in ACTIONS:
            belief.observe_feedback(ACTIONS.index(fb["action"]), fb["response"] == "accept")
    if observed == 0:
        notes.append("no meter data yet: the plan rests on the prior (import data, then `rhythm map`)")

    current, _ = records[-1]
    week = [(o, i) for o, i in records if date.fromisoformat(i["local_day"]) >= week_start]
    week_rewards = [float(np.asarray(o["last_reward"]).reshape(-1)[0]) for o, _ in week[1:]]
    steps = agent.plan_ahead(np.asarray(current["meters"]), int(current["t"]), week_rewards)
    steps = steps[: len(SLOTS) - first_slot]
    models = [BAYES_MODEL] * len(steps)

    if backend == "llm" and steps:
        action, reason = _llm_decision(model_path, [o for o, _ in week], _events_context(db, day), feedback)
        if action is not None:
            steps[0] = (action, reason)
            models[0] = f"llm:{model_path.name}"
        else:
            notes.append(f"the model gave no valid answer; used the Bayesian plan ({reason})")

    b = tuple(float(x) for x in belief.belief())
    sd = tuple(float(x) for x in belief.belief_sd())
    created = datetime.now(UTC)
    rows = [
        {
            "created_at": created, "local_day": day, "slot": SLOTS[first_slot + k], "action": ACTIONS[a],
            **dict(zip(("belief_social", "belief_morning", "belief_work"), b, strict=True)),
            **dict(zip(("belief_sd_social", "belief_sd_morning", "belief_sd_work"), sd, strict=True)),
            "rationale": reason, "model": model,
        }
        for k, ((a, reason), model) in enumerate(zip(steps, models, strict=True))
    ]
    ids = plans.insert_recommendations(db, rows)
    planned = [
        PlannedSlot(rec_id, day, r["slot"], r["action"], r["rationale"], r["model"])
        for rec_id, r in zip(ids, rows, strict=True)
    ]
    return Plan(day, planned, b, sd, models[0] if models else BAYES_MODEL, observed, len(feedback), notes)


def _finite(obs: dict[str, Any], *keys: str) -> bool:
    try:
        return all(np.isfinite(np.asarray(obs[k], dtype=float)).all() for k in keys)
    except (KeyError, TypeError, ValueError):
        return False


def _renderable_suffix(week: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The longest tail of the week that the compact prompt can show: every step in it has a
    known action and finite meters (a slot with no data or no action label breaks the chain;
    the model then sees the week from after the gap). Empty if the current slot has no
    meters."""
    k = len(week) - 1
    while k > 0 and 0 <= int(np.asarray(week[k].get("last_action", -1)).reshape(-1)[0]) < len(ACTIONS) \
            and _finite(week[k], "meters", "anomalies", "last_reward"):
        k -= 1
    while k < len(week) and not _finite(week[k], "meters"):
        k += 1  # the first observation only shows its meters
    return week[k:]


def _llm_decision(
    path: Path, week: list[dict[str, Any]], events: list[dict[str, Any]], feedback: list[dict[str, Any]]
) -> tuple[int | None, str]:
    from agent.prompting import (
        FORMAT_VERSION,
        OUTPUT_GBNF,
        PROMPT_FORMATS,
        parse_output,
        render_compact,
    )
    from agent.runtime import load_model

    fb = [
        {"action": f["action"], "response": "accepted" if f["response"] == "accept" else "ignored",
         "day": f["local_day"].weekday(), "slot": f["slot"]}
        for f in feedback[-8:]
    ]
    history = _renderable_suffix(week)
    if not history:
        return None, "no meters for the current slot"
    model = load_model(path)
    fmt = getattr(model, "prompt_format", None)
    fmt = fmt if fmt in PROMPT_FORMATS else FORMAT_VERSION
    try:
        prompt = render_compact(
            history, {"events": events, "feedback": fb}, [None] * (len(history) - 1), fmt=fmt
        )
    except ValueError as exc:  # a malformed observation: never a crash, the planner decides
        return None, f"the week could not be rendered: {exc}"
    text = model.complete(prompt, grammar=OUTPUT_GBNF, max_tokens=24)
    parsed = parse_output(text)
    if not parsed.valid:
        return None, parsed.error or "invalid output"
    return int(parsed.action_id), f"{parsed.action}: chosen by the local model {path.name}"


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
