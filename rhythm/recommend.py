"""`rhythm recommend` and `rhythm feedback`: the shell around the day planner.

Loads, calls, stores (STYLE rule 17); how a day is planned is ``agent.day`` (pure):

1. the person's recent days as simulator observations (this week and two before it, masked
   where a meter was not observed) update the Bayesian belief over who they are
   (agent.belief), with the accept/ignore history;
2. the day's and the next day's calendar events (with their classified actions), the
   person's recent nights and daily numbers go to ``agent.day.DayPlanner``: commitments,
   fixed slots, one time block per open slot with evidence and expected effect;
3. where a local model is configured or bundled, it chooses the current slot's action (its
   output constrained by a grammar; calendar events reach it only as their classified
   action and time, never their titles), and the planner's checks accept or refuse it;
4. every block is stored in `recommendations` with its times, evidence, expected effect,
   the belief and the meters it was given with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import ConfigError, ModelError, RhythmError
from common.records import ACTIONS, METERS, SLOTS
from common.timeutil import slot_of
from mapping.observations import belief_view
from rhythm.derive import observation_records
from rhythm.personal import personal_dynamics
from rhythm.settings import Settings, local_now, user_zone
from storage import derived, inputs, plans
from storage.db import Database

# Meters computed from real data are much noisier than the simulator's 0.012 per step.
REAL_NOISE_SD = 0.08
HISTORY_WEEKS = 2  # earlier weeks fed to the belief before this week's slots
#: The simulator student (prompt format v1): `rhythm sim eval --policy student`.
BUNDLED_MODEL = "student-q8_0.gguf"
#: The student trained on product-shaped weeks (format v4: unknown meters and actions,
#: calendar and answer lines, the person's filter before each slot): what `rhythm recommend`
#: asks on real days.
PRODUCT_MODEL = "student-real-q8_0.gguf"
REFINED_MODEL = "student-refined.gguf"
BAYES_MODEL = "bayes-v1"
NIGHTS_DAYS = 28
FACTS_DAYS = 35


@dataclass(frozen=True)
class PlannedSlot:
    """One recommendation: a time block of the day."""

    id: int
    local_day: date
    slot: str
    action: str
    rationale: str
    model: str
    start: datetime | None = None
    end: datetime | None = None
    kind: str = "block"
    evidence: tuple[str, ...] = ()
    expected_effect: dict[str, float] = field(default_factory=dict)


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
    timezone: str = "UTC"
    commitments: list[dict[str, Any]] = field(default_factory=list)
    fixed_slots: list[str] = field(default_factory=list)
    horizon: list[tuple[str, str, str]] = field(default_factory=list)
    wake: datetime | None = None
    bed: datetime | None = None
    # the current slot's choice before the checks: {"planner": ..., "model": ...} when a
    # local model was asked (benchmarks/student_real.py compares them); empty otherwise
    picks: dict[str, str | None] = field(default_factory=dict)

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
            "fixed_slots": list(self.fixed_slots),
            "slots": [
                {"id": s.id, "slot": s.slot, "action": s.action, "rationale": s.rationale, "model": s.model,
                 "start": _iso(s.start), "end": _iso(s.end), "belief": belief, "belief_sd": sd}
                for s in self.slots
            ],
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `rhythm recommend --json` (issue 19)."""
        names = ("social", "morning", "work")
        return {
            "day": self.day.isoformat(),
            "timezone": self.timezone,
            "wake": _iso(self.wake),
            "bed": _iso(self.bed),
            "commitments": self.commitments,
            "fixed_slots": list(self.fixed_slots),
            "recommendations": [
                {
                    "id": s.id, "slot": s.slot, "action": s.action, "kind": s.kind,
                    "start": _iso(s.start), "end": _iso(s.end), "rationale": s.rationale,
                    "evidence": list(s.evidence), "expected_effect": dict(s.expected_effect), "model": s.model,
                }
                for s in self.slots
            ],
            "belief": dict(zip(names, self.belief, strict=True)),
            "belief_sd": dict(zip(names, self.belief_sd, strict=True)),
            "model": self.model,
            "observed_slots": self.observed_slots,
            "feedback_used": self.feedback_used,
            "notes": self.notes,
            "horizon": [{"day": d, "slot": s, "action": a} for d, s, a in self.horizon],
        }


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat(timespec="minutes")


def bundled_model_path(name: str = BUNDLED_MODEL) -> Path | None:
    """A GGUF shipped in the package (``rhythm/models``), None if this install has none."""
    try:
        p = resources.files("rhythm.models") / name
    except ModuleNotFoundError:
        return None
    return Path(str(p)) if p.is_file() else None


def product_model_path() -> Path | None:
    """The bundled model for real days: the product-shaped student, else the simulator one."""
    return bundled_model_path(PRODUCT_MODEL) or bundled_model_path()


def refined_model_path(settings: Settings) -> Path:
    """Where ``rhythm train refine`` installs the student refined on the person's answers."""
    return settings.home / "models" / REFINED_MODEL


def choose_backend(settings: Settings) -> tuple[str, Path | None]:
    """("bayes", None) or ("llm", path): settings.agent_backend auto|bayes|llm. The model is
    ``model_path`` if set, else the refined student if ``rhythm train refine`` installed one,
    else the bundled product-shaped student (``product_model_path``)."""
    backend = settings.agent_backend
    if backend not in ("auto", "bayes", "llm"):
        raise ConfigError(f"agent_backend must be auto, bayes or llm, not {backend!r}")
    if backend == "bayes":
        return "bayes", None
    refined = refined_model_path(settings)
    path = settings.model_path or (refined if refined.is_file() else None) or product_model_path()
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


def _aware(epoch_s: float, tz: tzinfo) -> datetime:
    return datetime.fromtimestamp(float(epoch_s), UTC).astimezone(tz)


def _calendar(db: Database, day: date, tz: tzinfo, start: date | None = None) -> list[Any]:
    """The stored events of the day before (or from ``start``), the day and the day after,
    as the planner sees them."""
    from agent.day import CalendarEvent, is_rhythm_event_id

    return [
        CalendarEvent(
            start=_aware(e.start_s, tz), end=_aware(e.end_s, tz), title=e.title, action=e.action,
            source=e.source, status=e.status, transparency=e.transparency, all_day=e.all_day,
            self_response=e.self_response, rhythm_block=is_rhythm_event_id(e.event_id),
        )
        for e in inputs.events_between(db, start or day - timedelta(days=1), day + timedelta(days=2))
    ]


def _nights(db: Database, day: date, tz: tzinfo) -> list[Any]:
    """The person's main sleeps of the last four weeks: bed, wake-up and minutes asleep."""
    from agent.day import Night

    by_day: dict[date, list[Any]] = {}
    for r in inputs.main_sleeps(db, day - timedelta(days=NIGHTS_DAYS), day):
        by_day.setdefault(r.local_day, []).append(r)
    out = []
    for rows in by_day.values():
        slept = [r.sleep_min for r in rows if r.sleep_min is not None]
        out.append(Night(_aware(min(r.start_s for r in rows), tz), _aware(max(r.end_s for r in rows), tz),
                         float(sum(slept)) if slept else None))
    return out


def _facts(db: Database, day: date, meters: dict[str, float | None], when: str | None) -> Any:
    from agent.day import PersonFacts

    series = inputs.daily_series(db, day - timedelta(days=FACTS_DAYS), day)
    rmssd = series["hrv_rmssd_ms"]
    hrv, kind = (rmssd, "HRV") if rmssd else (series["hrv_sdnn_ms"], "HRV (SDNN)")
    return PersonFacts(sleep_min=series["sleep_min"], hrv_ms=hrv, hrv_kind=kind,
                       resting_hr=series["resting_hr_bpm"], steps=series["steps"], meters=meters,
                       meters_when=when)


def _when(info: dict[str, Any], day: date) -> str | None:
    prev = info.get("previous") or {}
    if not prev:
        return None
    d = date.fromisoformat(prev["local_day"])
    slot = prev["slot_name"]
    if d == day:
        return f"this {slot}" if slot != "night" else "tonight"
    if d == day - timedelta(days=1):
        return "last night" if slot == "night" else f"yesterday {slot}"
    return f"on {d:%a %d %b} ({slot})"


def _clock(value: str | None, name: str) -> time | None:
    if not value:
        return None
    try:
        return time.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{name}: expected a time like 07:00, got {value!r}") from None



def _person_filter() -> Any:
    from agent.belief import BeliefState

    # real deltas are noisy; weeks of answers need more importance samples than a simulated
    # week (min_ess: docs/agent.md section 7). The simulator's noisy-readings filter
    # (meter_obs_sd) is not used: real meters are scores against the person's usual, not
    # noisy readings of the simulator's levels (issue 21 decides how the two meet).
    return BeliefState(noise_sd=REAL_NOISE_SD, min_ess=100)


def _observe_answer(belief: Any, fb: dict[str, Any]) -> None:
    """One stored answer (``storage.plans.answers``) into the belief."""
    if fb["action"] not in ACTIONS:
        return
    a, accepted = ACTIONS.index(fb["action"]), fb["response"] == "accept"
    m = fb.get("meters_before")
    if isinstance(m, list) and len(m) == len(METERS) and fb["slot"] in SLOTS:
        # the answer model (feedback.md): p(accept | who they are, the meters then, slot, action)
        belief.observe_answer([np.nan if v is None else float(v) for v in m], SLOTS.index(fb["slot"]), a,
                              accepted)
    else:  # an answer to a recommendation stored before its meters were kept
        belief.observe_feedback(a, accepted)


def person_belief(
    records: list[tuple[dict[str, Any], dict[str, Any]]], feedback: list[dict[str, Any]]
) -> tuple[Any, int]:
    """The Bayesian belief about the person from their slot ``records`` (oldest first, as
    ``observation_records`` gives them) and their answers (``storage.plans.answers``), and
    how many records carried meter data. Shared by the plan and ``rhythm train refine``."""
    belief = _person_filter()
    observed = 0
    for obs, info in records:
        prev = info.get("previous")
        if prev and any(prev["observed"]):
            observed += 1
        belief.update_from_observation(belief_view(obs, info))
    for fb in feedback:
        _observe_answer(belief, fb)
    return belief, observed


def person_filters(
    records: list[tuple[dict[str, Any], dict[str, Any]]], feedback: list[dict[str, Any]], week_start: date
) -> dict[int, list[float]]:
    """What the filter believed of the person before each slot of the week from
    ``week_start`` (the v4 prompt's ``b`` lines: step -> median and sd of the three traits
    and the meters the plan starts from, the slot's filled meters):
    the records fed in order, and each answer once its slot has passed, as the training
    weeks' teacher read them (``training.realshape.StreamTeacher``)."""
    from agent.belief import filter_belief

    belief = _person_filter()
    pending = sorted(
        (fb for fb in feedback if fb.get("slot") in SLOTS),
        key=lambda fb: (fb["local_day"], SLOTS.index(fb["slot"])),
    )
    out: dict[int, list[float]] = {}
    k = 0
    for obs, info in records:
        here = (date.fromisoformat(info["local_day"]), SLOTS.index(info["slot_name"]))
        while k < len(pending) and (pending[k]["local_day"], SLOTS.index(pending[k]["slot"])) < here:
            _observe_answer(belief, pending[k])
            k += 1
        belief.update_from_observation(belief_view(obs, info))
        if here[0] >= week_start:
            out[int(obs["t"])] = filter_belief(belief, obs["meters"])  # the filled meters the plan starts from
    return out


def make_plan(db: Database, settings: Settings, day: date | None = None, now: datetime | None = None) -> Plan:
    """Plan the rest of `day` (default: the current local day) as time blocks and store it
    (inside the caller's transaction: ``rhythm.jobs.recommend``)."""
    from agent.day import Answer, DayInputs, DayPlanner, with_model_pick

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
    feedback = plans.answers(db)
    belief, observed = person_belief(records, feedback)
    if observed == 0:
        notes.append("no meter data yet: the plan rests on the prior (import data, then `rhythm map`)")

    # the person's own dynamics from the days before (docs/agent.md section 8): their
    # departures from the table go into the plan's model and its evidence
    dynamics = personal_dynamics(db, day)
    if dynamics.fitted and dynamics.departures():
        n = len({d["action"] for d in dynamics.departures()})
        notes.append(f"your own dynamics ({dynamics.n_transitions} slot-to-slot steps) depart from the table for "
                     f"{n} action{'s' if n > 1 else ''}: the plan uses yours (`rhythm meters --fit`)")
    current, cur_info = records[-1]
    prev = cur_info.get("previous") or {}
    seen = prev.get("observed") or [False] * len(METERS)
    meters_now = np.asarray(current["meters"], dtype=np.float64)
    shown = {m: (float(v) if ok else None) for m, v, ok in zip(METERS, meters_now, seen, strict=True)}
    inputs_ = DayInputs(
        day=day, tz=tz, events=_calendar(db, day, tz), nights=_nights(db, day, tz),
        facts=_facts(db, day, shown, _when(cur_info, day)), meters=meters_now, belief=belief,
        now=now if day == today else None,
        answers=[Answer(a["local_day"], a["slot"], a["action"], a["response"]) for a in feedback],
        recent_actions=[(r.day, r.slot, r.action) for r in derived.slot_rows(db, day - timedelta(days=14), day)
                        if r.action and (r.day, SLOTS.index(r.slot)) < (day, first_slot)],
        wake_override=_clock(settings.wake_time, "wake_time"), bed_override=_clock(settings.bed_time, "bed_time"),
        dynamics=dynamics,
    )
    planner = DayPlanner(inputs_)
    dp = planner.plan()
    notes.extend(dp.notes)

    model_name = BAYES_MODEL
    open_now = [b for b in dp.blocks if b.slot == SLOTS[first_slot] and b.kind != "bedtime"]
    picks: dict[str, str | None] = {}
    if backend == "llm" and open_now:
        fixed = _week_fixed(db, dp, week_start, day, tz)
        action, reason = _llm_decision(model_path, records, week_start, dp, day, fixed, feedback)
        name = f"llm:{model_path.name}"
        picks = {"planner": open_now[0].action, "model": None if action is None else ACTIONS[action]}
        if action is None:
            notes.append(f"the local model gave no valid answer; the planner's plan stands ({reason})")
        else:
            ok, note = with_model_pick(planner, dp, open_now[0].slot, ACTIONS[action], name)
            if ok:
                model_name = name
            else:
                notes.append(note)

    created = datetime.now(UTC)
    before = [None if not ok else round(float(v), 4) for v, ok in zip(meters_now, seen, strict=True)]
    rows = [
        {
            "created_at": created, "local_day": day, "slot": b.slot, "action": b.action,
            **dict(zip(("belief_social", "belief_morning", "belief_work"), dp.belief, strict=True)),
            **dict(zip(("belief_sd_social", "belief_sd_morning", "belief_sd_work"), dp.belief_sd, strict=True)),
            "rationale": b.rationale, "model": b.chosen_by if b.chosen_by != "planner" else BAYES_MODEL,
            "start_ts": b.start, "end_ts": b.end, "kind": b.kind, "evidence": json.dumps(b.evidence),
            "expected_effect": json.dumps(b.expected_effect), "meters_before": json.dumps(before),
        }
        for b in dp.blocks
    ]
    ids = plans.insert_recommendations(db, rows)
    planned = [
        PlannedSlot(rec_id, day, b.slot, b.action, b.rationale, r["model"], b.start, b.end, b.kind,
                    tuple(b.evidence), dict(b.expected_effect))
        for rec_id, b, r in zip(ids, dp.blocks, rows, strict=True)
    ]
    commitments = [
        {"start": _iso(c.start), "end": _iso(c.end), "title": c.title, "action": c.action, "source": c.source}
        for c in dp.frame.commitments
    ]
    return Plan(day, planned, dp.belief, dp.belief_sd, model_name, observed, len(feedback), notes,
                timezone=getattr(tz, "key", str(tz)), commitments=commitments,
                fixed_slots=[s for s in SLOTS if s in dp.fixed], horizon=dp.horizon,
                wake=dp.frame.wake, bed=dp.frame.bed, picks=picks)


def _events_context(dp: Any, day: date) -> list[dict[str, Any]]:
    """The day's commitments for a v1/v2 model's prompt (``commitment_lines``)."""
    return commitment_lines(dp.frame, day)


def commitment_lines(frame: Any, day: date) -> list[dict[str, Any]]:
    """The commitments of ``frame`` on ``day`` for a v1/v2 model's prompt: their classified
    action and slot only. A title never reaches the model, so no wording can sway it beyond
    its class."""
    out = []
    for c in frame.commitments:
        d, s = slot_of(c.start.replace(tzinfo=None))
        if d == day:
            out.append({"title": (c.action or "busy").lower(), "day": day.weekday(), "slot": SLOTS[s]})
    return out


def fixed_lines(frames: list[Any]) -> list[dict[str, Any]]:
    """The fixed slots of these day frames for a v3 prompt (``cal`` lines): each day's slots
    that commitments hold, with the action the planner gives them (None where no commitment
    was classified); classes and slots only, never a title."""
    out = []
    for frame in frames:
        for s, action in sorted(frame.fixed.items()):
            out.append({"day": frame.day.weekday(), "slot": SLOTS[s],
                        "action": None if s in frame.fixed_unclassified else action})
    return out


def _week_fixed(db: Database, dp: Any, week_start: date, day: date, tz: tzinfo) -> list[dict[str, Any]]:
    """The fixed slots of this week up to ``day`` (``fixed_lines``); earlier days are framed
    as the planner frames today."""
    from agent.day.calendar import frame_day

    frames = [dp.frame]
    if day > week_start:
        events = _calendar(db, day, tz, start=week_start)
        habits = dp.frame.habits
        frames = [frame_day(week_start + timedelta(days=k), tz, events, habits)
                  for k in range((day - week_start).days)] + frames
    return fixed_lines(frames)


def _finite(obs: dict[str, Any], *keys: str) -> bool:
    try:
        return all(np.isfinite(np.asarray(obs[k], dtype=float)).all() for k in keys)
    except (KeyError, TypeError, ValueError):
        return False


def _renderable_suffix(week: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For v1/v2 models (their prompt has no way to say "unknown"): the longest tail of the
    week in which every step has a known action and finite meters (a slot with no data or
    no action label breaks the chain; the model then sees the week from after the gap).
    Empty if the current slot has no meters. A v3 model sees the whole week (`model_prompt`)."""
    k = len(week) - 1
    while k > 0 and 0 <= int(np.asarray(week[k].get("last_action", -1)).reshape(-1)[0]) < len(ACTIONS) \
            and _finite(week[k], "meters", "anomalies", "last_reward"):
        k -= 1
    while k < len(week) and not _finite(week[k], "meters"):
        k += 1  # the first observation only shows its meters
    return week[k:]


def model_prompt(
    week: list[tuple[dict[str, Any], dict[str, Any]]],
    fixed: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    fmt: str,
    events: list[dict[str, Any]] | None = None,
    filters: dict[int, list[float]] | None = None,
) -> str:
    """The local model's prompt for the decision after the week's last record.

    ``week``: (observation, info) of this week's slots from Monday, as
    ``rhythm.derive.observation_records`` gives them. Format v3: the whole week, every
    meter that was not observed and every slot nobody classified written ``?``
    (``agent.prompting.observed_view``), the week's fixed slots as ``cal`` lines and this
    week's answers as ``fb`` lines; format v4 also the filter's belief before each slot
    (``filters``, :func:`person_filters`). Formats v1/v2 cannot say "unknown": the week from after
    its last gap (``_renderable_suffix``), with ``events`` and the last 8 answers as context.
    Raises ValueError when there is nothing to render."""
    from agent.prompting import FORMAT_V4, observed_view, render_compact

    if fmt == FORMAT_V4:
        if not week:
            raise ValueError("no slots this week")
        monday = date.fromisoformat(week[0][1]["local_day"]) - timedelta(days=week[0][0]["day"])
        history = [observed_view(o, (i.get("previous") or {}).get("observed")) for o, i in week]
        fb = [
            {"action": f["action"], "response": f["response"], "day": f["local_day"].weekday(), "slot": f["slot"]}
            for f in answers if monday <= f["local_day"] < monday + timedelta(days=7)
        ]
        context = {"events": fixed, "feedback": fb, "observe": "noisy"}
        if fmt == FORMAT_V4:
            if filters is None:
                raise ValueError("a v4 prompt needs the filter's beliefs")
            context["filters"] = filters
        return render_compact(history, context, fmt=fmt)
    fb = [
        {"action": f["action"], "response": "accepted" if f["response"] == "accept" else "ignored",
         "day": f["local_day"].weekday(), "slot": f["slot"]}
        for f in answers[-8:]
    ]
    history = _renderable_suffix([o for o, _ in week])
    if not history:
        raise ValueError("no meters for the current slot")
    return render_compact(history, {"events": events or [], "feedback": fb}, [None] * (len(history) - 1), fmt=fmt)


def _llm_decision(
    path: Path,
    records: list[tuple[dict[str, Any], dict[str, Any]]],
    week_start: date,
    dp: Any,
    day: date,
    fixed: list[dict[str, Any]],
    feedback: list[dict[str, Any]],
) -> tuple[int | None, str]:
    from agent.prompting import FORMAT_V4, FORMAT_VERSION, OUTPUT_GBNF, PROMPT_FORMATS, parse_output
    from agent.runtime import load_model

    model = load_model(path)
    fmt = getattr(model, "prompt_format", None)
    fmt = fmt if fmt in PROMPT_FORMATS else FORMAT_VERSION
    week = [(o, i) for o, i in records if date.fromisoformat(i["local_day"]) >= week_start]
    filters = person_filters(records, feedback, week_start) if fmt == FORMAT_V4 else None
    try:
        prompt = model_prompt(week, fixed, feedback, fmt, events=_events_context(dp, day), filters=filters)
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
