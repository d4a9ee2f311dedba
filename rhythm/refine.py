"""`rhythm train refine`: the local student refined on the person's own answers.

Every answered recommendation becomes one training example: the prompt the student would
have seen at that decision (the week so far, as ``rhythm recommend`` renders it in the
model's prompt format; calendar classes, never titles) and the answer it should have given,
with hindsight (:func:`agent.hindsight.answer_targets`: the belief has read every meter and
every answer; an accepted recommendation keeps its action, an ignored one gets the action
with the best expected value for this person). :func:`training.answers.refine_gguf` trains
LoRA on them from the base GGUF (the bundled student unless ``--base``), and the result is
installed at ``RHYTHM_HOME/models/student-refined.gguf`` (0600), which ``rhythm recommend``
then uses (``choose_backend``). ``--reset`` removes it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from agent.prompting import WEEK_FORMATS, model_prompt_format
from common.errors import ModelError, RhythmError
from common.records import ACTIONS, METERS, SLOTS
from rhythm.ask_model import fixed_lines, model_prompt, product_model_path, refined_model_path
from rhythm.belief_filter import person_belief, person_filters
from rhythm.day_inputs import HISTORY_WEEKS, calendar_events, main_nights
from rhythm.derive import observation_records
from rhythm.settings import Settings, user_zone
from storage import plans
from storage.db import Database

#: Fewer answers than this teach the student nothing it can keep.
MIN_ANSWERS = 4


@dataclass
class RefineData:
    examples: list[Any]
    answers: int
    skipped: int
    changed: int
    belief: tuple[float, float, float]


def _usable(fb: dict[str, Any]) -> bool:
    m = fb.get("meters_before")
    return fb["action"] in ACTIONS and fb["slot"] in SLOTS and isinstance(m, list) and len(m) == len(METERS)


def week_frames(db: Database, week_start: date, day: date, tz) -> list[Any]:
    """The calendar frames of ``week_start`` .. ``day`` (classes and slots only)."""
    from agent.day.calendar import frame_day, sleep_habits

    events = calendar_events(db, day, tz, start=week_start)
    habits = sleep_habits(main_nights(db, day, tz), tz)
    return [frame_day(week_start + timedelta(days=k), tz, events, habits) for k in range((day - week_start).days + 1)]


def collect(db: Database, settings: Settings, fmt: str) -> RefineData:
    """The person's answered recommendations as (prompt, answer) examples in format ``fmt``."""
    from agent.hindsight import Answered, answer_targets
    from agent.prompting import format_output
    from training.answers import Example

    tz = user_zone(settings)
    feedback = plans.answers(db, implicit=bool(settings.implicit_answers))
    usable = [f for f in feedback if _usable(f)]
    if len(usable) < MIN_ANSWERS:
        raise RhythmError(
            f"{len(usable)} answered recommendations with their meters; refining needs at least {MIN_ANSWERS} "
            "(answer with `rhythm feedback ID accept|ignore`)"
        )
    first, last = min(f["local_day"] for f in usable), max(f["local_day"] for f in usable)
    start = first - timedelta(days=first.weekday()) - timedelta(weeks=HISTORY_WEEKS)
    records = observation_records(db, start, last, tz=tz)
    key = lambda i: (date.fromisoformat(i["local_day"]), SLOTS.index(i["slot_name"]))  # noqa: E731
    belief, _ = person_belief(records, feedback)
    answered = [
        Answered([np.nan if v is None else float(v) for v in f["meters_before"]], SLOTS.index(f["slot"]),
                 ACTIONS.index(f["action"]), f["response"] == "accept")
        for f in usable
    ]
    targets = answer_targets(belief, answered)
    weeks: dict[date, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for o, i in records:
        d = date.fromisoformat(i["local_day"])
        weeks[d - timedelta(days=d.weekday())].append((o, i))
    examples, skipped, changed = [], 0, 0
    week_filters: dict[date, dict[int, list[float]]] = {}
    for f, t in zip(usable, targets, strict=True):
        day, slot = f["local_day"], SLOTS.index(f["slot"])
        monday = day - timedelta(days=day.weekday())
        week = [(o, i) for o, i in weeks.get(monday, []) if key(i) <= (day, slot)]
        before = [g for g in feedback if (g["local_day"], SLOTS.index(g["slot"])) < (day, slot) and g["slot"] in SLOTS]
        frames = week_frames(db, monday, day, tz)
        fixed = fixed_lines(frames)
        filters = None
        if fmt in WEEK_FORMATS:  # the filter before each slot of that week: an answer counts once its
            # slot has passed, so one pass over the week serves every decision in it
            if monday not in week_filters:
                upto = [(o, i) for o, i in records if date.fromisoformat(i["local_day"]) < monday + timedelta(days=7)]
                week_filters[monday] = person_filters(upto, feedback, monday)
            filters = week_filters[monday]
        try:
            prompt = model_prompt(week, fixed, before, fmt, filters=filters)
        except ValueError:  # nothing the model could read at that decision
            skipped += 1
            continue
        # its confidence: 1 for a typed answer, how sure the data is for one read from it
        # (storage.plans.answers gives both)
        weight = float(f["confidence"])
        if weight <= 0.0:  # the data could not tell at all: nothing to learn from
            skipped += 1
            continue
        examples.append(Example(prompt, format_output(t.action, t.belief), weight))
        changed += t.changed
    b = belief.belief()
    return RefineData(examples, len(usable), skipped, changed, (float(b[0]), float(b[1]), float(b[2])))


def refine(
    db: Database,
    settings: Settings,
    base: Path | None = None,
    steps: int = 30,
    progress=None,
) -> dict[str, Any]:
    """Refine the base student on the person's answers and install it (module docstring)."""
    from importlib.util import find_spec

    from agent.gguf_check import check_model_file

    base = Path(base).expanduser() if base else product_model_path()
    if base is None:
        raise ModelError("no bundled student in this install: give --base PATH.gguf")
    if not base.is_file():
        raise ModelError(f"{base}: model file not found")
    check_model_file(base)  # whole: header, every tensor's bytes, not blanked (a truncated --base)
    for mod in ("torch", "peft", "transformers", "llama_cpp", "gguf"):
        if find_spec(mod) is None:
            raise ModelError(f"refining the student needs {mod}: pip install 'rhythm[ml]'")
    from training.answers import RefineSettings, gguf_prompt_format, refine_gguf
    try:
        fmt = model_prompt_format(gguf_prompt_format(base))
    except ValueError as exc:  # a student of a retired format: say so
        raise ModelError(f"{base.name}: {exc}") from None
    if fmt not in WEEK_FORMATS:  # its refined model could not be asked on a real day
        raise ModelError(f"{base.name}: a model in prompt format {fmt!r}; refining starts from a "
                         f"{' or '.join(WEEK_FORMATS)} student")
    data = collect(db, settings, fmt)
    if not data.examples:
        raise RhythmError(f"none of the {data.answers} answers could be rendered as a prompt (no meters that week)")
    dest = refined_model_path(settings)
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        rep = refine_gguf(base, data.examples, Path(tmp), RefineSettings(steps=steps),
                          progress=progress or (lambda *_: None))
        model = Path(rep["model"])
        check_installable(model, base)  # a bad one is refused; the installed model stays
        os.chmod(model, 0o600)
        os.replace(model, dest)  # atomic: recommend sees the old model or the new one
    report = {
        "model": str(dest),
        "base": str(base),
        "prompt_format": fmt,
        "answers": data.answers,
        "examples": len(data.examples),
        "skipped": data.skipped,
        "targets_changed": data.changed,
        "belief": [round(x, 3) for x in data.belief],
        "steps": rep["steps"],
        "seconds": rep["seconds"],
        "answer_loss_before": rep["answer_loss_before"],
        "answer_loss_after": rep["answer_loss_after"],
        "refined_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    manifest = dest.with_suffix(".json")
    manifest.write_text(json.dumps(report, indent=2) + "\n")
    os.chmod(manifest, 0o600)
    return report


def check_installable(model: Path, base: Path) -> None:
    """Refuse a refined model that is not whole (agent.gguf_check: header, size, blank
    tensors, the base's tensor table) or that llama.cpp cannot answer with (a parity probe:
    it must load and produce a token), before it replaces the installed one."""
    from agent.gguf_check import check_model_file

    check_model_file(model, like=base)
    from importlib.util import find_spec

    if find_spec("llama_cpp") is None:
        return
    from agent.runtime import LlamaCppModel

    try:
        LlamaCppModel(model, n_ctx=256).complete("day 0 morning:", max_tokens=1)
    except Exception as exc:  # noqa: BLE001 - any failure to answer means: do not install it
        raise ModelError(f"{model.name}: the refined model does not answer ({type(exc).__name__}); refused, "
                         "the installed model is kept") from None


def reset(settings: Settings) -> bool:
    """Remove the refined student (``rhythm recommend`` goes back to the bundled one)."""
    dest = refined_model_path(settings)
    found = dest.exists()
    dest.unlink(missing_ok=True)
    dest.with_suffix(".json").unlink(missing_ok=True)
    return found
