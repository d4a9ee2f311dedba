"""The ask step of ``rhythm recommend``: the local model's pick for the current slot.

Which model (``choose_backend``: the refined student ``rhythm train refine`` installed, else
the bundled product-shaped student, else none and the day planner decides alone), its prompt
(``model_prompt``: the week as the model was trained to read it, prompt format v4;
calendar events reach it only as their classified action and slot, never their titles), and
its pick, put through the planner's checks (``agent.day.with_model_pick``), which accept or
refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta, tzinfo
from importlib import resources
from pathlib import Path
from typing import Any

from common.errors import ConfigError, ModelError
from common.records import ACTIONS, SLOTS
from rhythm.day_inputs import DayData, calendar_events
from rhythm.settings import Settings
from storage.db import Database

#: The simulator student (prompt format v1): `rhythm sim eval --policy student`; never asked
#: on a real day.
BUNDLED_MODEL = "student-q8_0.gguf"
#: The student trained on product-shaped weeks (format v4: unknown meters and actions,
#: calendar and answer lines, the person's filter before each slot): what `rhythm recommend`
#: asks on real days.
PRODUCT_MODEL = "student-real-q8_0.gguf"
REFINED_MODEL = "student-refined.gguf"


@dataclass
class Asked:
    """What the ask step did: the plan's model name when the model's pick stood (None: the
    planner's plan stands), the two picks of the current slot, and the notes it adds."""

    model: str | None = None
    picks: dict[str, str | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def bundled_model_path(name: str = BUNDLED_MODEL) -> Path | None:
    """A GGUF shipped in the package (``rhythm/models``), None if this install has none."""
    try:
        p = resources.files("rhythm.models") / name
    except ModuleNotFoundError:
        return None
    return Path(str(p)) if p.is_file() else None


def product_model_path() -> Path | None:
    """The bundled model for real days: the product-shaped student, None if this install has
    none (then the day planner decides alone)."""
    return bundled_model_path(PRODUCT_MODEL)


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
    if backend == "auto" and not _llama_cpp_available():
        return "bayes", None  # the base install has no llama.cpp: the day planner decides alone
    refined = refined_model_path(settings)
    path = settings.model_path or (refined if _whole(refined) else None) or product_model_path()
    if path is None:
        if backend == "llm":
            raise ModelError("agent_backend is llm but no model: set model_path to a local GGUF file")
        return "bayes", None
    if not Path(path).is_file():
        raise ModelError(f"{path}: model file not found (setting model_path)")
    return "llm", Path(path)


def _whole(model: Path) -> bool:
    """Whether an installed refined model is there and whole (agent.gguf_check); a damaged
    one is passed over for the bundled student, never loaded."""
    if not model.is_file():
        return False
    from agent.gguf_check import check_model_file

    try:
        check_model_file(model)
    except ModelError:
        return False
    return True


def no_model_note(settings: Settings) -> str | None:
    """The plan's note when ``auto`` finds no model to ask at all (no model_path, no refined
    student, no bundled one): the day planner decides alone."""
    if settings.agent_backend != "auto" or settings.model_path or refined_model_path(settings).is_file():
        return None
    if product_model_path() is not None:
        return None
    return "no local model in this install: the day planner decides alone"


def _llama_cpp_available() -> bool:
    from importlib.util import find_spec

    return find_spec("llama_cpp") is not None


def fixed_lines(frames: list[Any]) -> list[dict[str, Any]]:
    """The fixed slots of these day frames for the prompt (``cal`` lines): each day's slots
    that commitments hold, with the action the planner gives them (None where no commitment
    was classified); classes and slots only, never a title."""
    out = []
    for frame in frames:
        for s, action in sorted(frame.fixed.items()):
            out.append({"day": frame.day.weekday(), "slot": SLOTS[s],
                        "action": None if s in frame.fixed_unclassified else action})
    return out


def week_fixed(db: Database, dp: Any, week_start: date, day: date, tz: tzinfo) -> list[dict[str, Any]]:
    """The fixed slots of this week up to ``day`` (``fixed_lines``); earlier days are framed
    as the planner frames today."""
    from agent.day.calendar import frame_day

    frames = [dp.frame]
    if day > week_start:
        events = calendar_events(db, day, tz, start=week_start)
        habits = dp.frame.habits
        frames = [frame_day(week_start + timedelta(days=k), tz, events, habits)
                  for k in range((day - week_start).days)] + frames
    return fixed_lines(frames)


def model_prompt(
    week: list[tuple[dict[str, Any], dict[str, Any]]],
    fixed: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    fmt: str,
    filters: dict[int, list[float]] | None = None,
    objective: dict[str, float] | None = None,
) -> str:
    """The local model's prompt for the decision after the week's last record.

    ``week``: (observation, info) of this week's slots from Monday, as
    ``rhythm.derive.observation_records`` gives them. Format v4: the whole week, every
    meter that was not observed and every slot nobody classified written ``?``
    (``agent.prompting.observed_view``), the week's fixed slots as ``cal`` lines and this
    week's answers as ``fb`` lines, and the filter's belief before each slot
    (``filters``, ``rhythm.belief_filter.person_filters``). Format v6: the same, and after
    it the planner's ``objective`` line (``agent.prompting.objective_line``;
    ``agent.day.objective_facts``). Raises ModelError for another format (no model a real
    day asks reads one) and ValueError when there is nothing to render."""
    from agent.prompting import (
        FORMAT_V6,
        WEEK_FORMATS,
        objective_line,
        observed_view,
        render_compact,
    )

    if fmt not in WEEK_FORMATS:
        raise ModelError(f"prompt format {fmt!r}: real days ask models in {' or '.join(WEEK_FORMATS)}")
    if not week:
        raise ValueError("no slots this week")
    monday = date.fromisoformat(week[0][1]["local_day"]) - timedelta(days=week[0][0]["day"])
    history = [observed_view(o, (i.get("previous") or {}).get("observed")) for o, i in week]
    fb = [
        {"action": f["action"], "response": f["response"], "day": f["local_day"].weekday(), "slot": f["slot"]}
        for f in answers if monday <= f["local_day"] < monday + timedelta(days=7)
    ]
    if filters is None:
        raise ValueError("a v4 prompt needs the filter's beliefs")
    context: dict[str, Any] = {"events": fixed, "feedback": fb, "observe": "noisy", "filters": filters}
    text = render_compact(history, context, fmt=fmt)
    return text + objective_line(objective or {}) if fmt == FORMAT_V6 else text


def model_format(model: Any, path: Path) -> str:
    """The prompt format ``model`` says it reads; ModelError unless a real day can ask it."""
    from agent.prompting import WEEK_FORMATS

    fmt = getattr(model, "prompt_format", None)
    if fmt not in WEEK_FORMATS:
        said = f"says prompt format {fmt!r}" if fmt else "says no prompt format (rhythm v1)"
        raise ModelError(f"{path.name}: the model {said}; `rhythm recommend` asks models trained on "
                         f"{' or '.join(WEEK_FORMATS)} (set model_path to one, or agent_backend = bayes)")
    return fmt


def ask_model(
    db: Database, path: Path, data: DayData, filters: dict[int, list[float]], planner: Any, dp: Any
) -> Asked:
    """Ask the model at ``path`` for the current slot's action and put its pick through the
    planner's checks (``dp`` changes where the pick stands). ``filters``: the filter before
    each slot of the week (``rhythm.belief_filter.run_filter``)."""
    from agent.day import with_model_pick

    open_now = [b for b in dp.blocks if b.slot == SLOTS[data.first_slot]
                and b.kind not in ("bedtime", "day_sleep", "shift_nap")]
    if not open_now:
        return Asked()
    fixed = week_fixed(db, dp, data.week_start, data.day, data.tz)
    action, reason = _pick(path, data, fixed, filters, dp, open_now[0].slot)
    name = f"llm:{path.name}"
    asked = Asked(picks={"planner": open_now[0].action, "model": None if action is None else ACTIONS[action]})
    if action is None:
        asked.notes.append(f"the local model gave no valid answer; the planner's plan stands ({reason})")
        return asked
    ok, note = with_model_pick(planner, dp, open_now[0].slot, ACTIONS[action], name)
    if ok:
        asked.model = name
    else:
        asked.notes.append(note)
    return asked


def _pick(path: Path, data: DayData, fixed: list[dict[str, Any]], filters: dict[int, list[float]],
          dp: Any, slot: str) -> tuple[int | None, str]:
    """The model's action for ``slot`` of the plan ``dp``: it chooses among what the slot can
    hold (its grammar says so), never an action the day has no time for; a v6 model also
    reads the planner's objective for each."""
    from agent.day import objective_facts, slot_actions
    from agent.prompting import FORMAT_V6, output_grammar, parse_output
    from agent.runtime import load_model

    model = load_model(path)
    fmt = model_format(model, path)
    objective = objective_facts(dp, slot) if fmt == FORMAT_V6 else None
    try:
        prompt = model_prompt(data.week, fixed, data.feedback, fmt, filters=filters, objective=objective)
    except ValueError as exc:  # a malformed observation: never a crash, the planner decides
        return None, f"the week could not be rendered: {exc}"
    text = model.complete(prompt, grammar=output_grammar(slot_actions(dp, slot)), max_tokens=24)
    parsed = parse_output(text)
    if not parsed.valid:
        return None, parsed.error or "invalid output"
    return int(parsed.action_id), f"{parsed.action}: chosen by the local model {path.name}"
