"""The distilled student as a simulator policy in every mode (feedback.md).

:class:`StudentPolicy` wraps :class:`agent.lab.llm_policy.LLMPolicy` (compact prompt, GBNF
answer) so ``rhythm sim eval --policy student`` runs with or without feedback and under
every observation condition:

- **Answers** become the prompt's feedback lines (``fb d1 morning DEEP_WORK ignored``; the
  last :data:`agent.prompting.MAX_FEEDBACK`), the context the product gives it too; in
  format v4 every answer of the week stands after its step (``fb DEEP_WORK ignored``).
- **Missing readings.** A format v4 student reads them as the product shows them: ``?`` for
  a missing meter, anomaly or reward and for an action nobody observed, and the observation
  condition on the ``obs`` line (it is trained on such weeks, ``training.realshape``). The
  v1 prompt shows numbers only, so what a v1 student reads is a view of the
  observation: a missing meter shows its last reading (the spec's initial meters before
  any), a missing delta, anomaly or reward shows 0, and an applied action that was not
  observed (an ignored recommendation in the answers-only condition) shows the
  recommendation (its feedback line says it was ignored); it was trained on clean weeks
  only, so this measures how they cope, not a trained skill.
- **Calendar weeks** (:mod:`simulator.calendar`). With ``read_calendar`` the week's fixed
  slots in the observation become the prompt's calendar lines (:func:`calendar_events`:
  ``cal d0 morning "ADMIN_WORK"`` in format v1, ``cal morning ADMIN_WORK`` under each day
  in v4). The shipped v1 student never saw such lines in training: what it does with them
  is measured, not taught. Without ``read_calendar`` the calendar is not shown.
- **The filter (format v4).** A v4 student is given what the Bayesian filter believes of the
  person before each decision (``b`` lines): the policy runs the teacher's own filter (a
  ``BayesAgent`` that does not plan, configured for the mode as the teacher is) on the same
  observations and answers, so the student is left the plan.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from agent.lab.llm_policy import LLMPolicy
from agent.prompting import MAX_FEEDBACK, WEEK_FORMATS
from agent.runtime import LlamaCppModel, Model
from simulator import spec
from simulator.feedback import check_observe

_RESPONSES = {1: "accepted", 2: "ignored"}
#: The simulator student's file in :mod:`agent.lab.models` (format v1).
SIMULATOR_STUDENT = "student-q8_0.gguf"


def simulator_student_path() -> Path | None:
    """The bundled simulator student (``rhythm sim eval --policy student``), None if this
    install has none."""
    try:
        p = resources.files("agent.lab.models") / SIMULATOR_STUDENT
    except ModuleNotFoundError:
        return None
    return Path(str(p)) if p.is_file() else None


class StudentPolicy:
    """A language-model student in any feedback / observation mode (module docstring)."""

    def __init__(self, model: Model, max_tokens: int = 24, read_calendar: bool = False) -> None:
        self.llm = LLMPolicy(model, form="compact", max_tokens=max_tokens)
        self.read_calendar = bool(read_calendar)
        self.feedback = False
        self.observe = "clean"
        self._filter: FilterTrack | None = None
        self.reset(0)

    @classmethod
    def from_gguf(cls, path: str | Path, n_ctx: int = 2048, read_calendar: bool = False) -> StudentPolicy:
        return cls(LlamaCppModel(path, n_ctx=n_ctx, n_threads=1), read_calendar=read_calendar)

    def configure(self, feedback: bool = False, observe: str = "clean") -> None:
        self.feedback = bool(feedback)
        self.observe = check_observe(observe)
        self._filter = None

    def reset(self, seed: int) -> None:
        self._seed = int(seed)
        self.llm.reset(seed)
        self.llm.set_context(None)
        self._answers: list[dict[str, Any]] = []
        self._seen = np.array(spec.INITIAL_METERS, dtype=np.float64)
        if self.reads_filter:
            if self._filter is None:
                self._filter = FilterTrack(self.feedback, self.observe)
            self._filter.reset(self._seed)

    @property
    def reads_filter(self) -> bool:
        """Whether the prompt is of the product's shape (format v4 or v6, without an objective line): what is not known shown
        as ``?``, the whole week's answers, the Bayesian filter's belief before each step."""
        return self.llm.prompt_format in WEEK_FORMATS

    def view(self, obs: dict[str, Any]) -> dict[str, Any]:
        """The observation as the student's prompt shows it (module docstring)."""
        if self.reads_filter:
            return dict(obs)
        out = dict(obs)
        m = np.asarray(obs["meters"], dtype=np.float64)
        self._seen = np.where(np.isfinite(m), m, self._seen)
        out["meters"] = self._seen.copy()
        for key in ("deltas", "anomalies", "last_reward"):
            v = np.asarray(obs[key], dtype=np.float64)
            out[key] = np.where(np.isfinite(v), v, 0.0)
        if int(obs["t"]) >= 1 and int(obs["last_action"]) >= spec.N_ACTIONS:
            out["last_action"] = int(obs.get("last_recommendation", spec.N_ACTIONS))
        return out

    def act(self, observation: dict[str, Any]) -> tuple[int, np.ndarray | None]:
        t = int(observation["t"])
        if t == 0:
            self.reset(self._seed)
        answer = int(observation.get("last_answer", 0) or 0)
        if t >= 1 and answer in _RESPONSES:
            self._answers.append(
                {
                    "action": int(observation["last_recommendation"]),
                    "response": _RESPONSES[answer],
                    "day": (t - 1) // spec.SLOTS_PER_DAY,
                    "slot": (t - 1) % spec.SLOTS_PER_DAY,
                }
            )
        context: dict[str, Any] = {}
        if self.read_calendar and observation.get("calendar") is not None:
            context["events"] = calendar_events(observation["calendar"])
        if self._answers:
            # v4 shows each answer after its step, the whole week (as rhythm recommend does)
            context["feedback"] = self._answers if self.reads_filter else self._answers[-MAX_FEEDBACK:]
        if self.reads_filter and self.observe != "clean":
            context["observe"] = self.observe
        if self.reads_filter:
            context["filters"] = self._filter.read(observation)
        if context:
            self.llm.set_context(context)
        return self.llm.act(self.view(observation))


class FilterTrack:
    """The teacher's filter run beside a v4 student: a ``BayesAgent`` that does not plan,
    configured for the mode as the teacher is, reading the same observations (answers
    included); :meth:`read` gives the week's ``b`` line numbers by step, the prompt context's
    ``filters`` (``agent.prompting.filter_line``). Used by :class:`StudentPolicy` and by the
    PyTorch student (``training.student.TorchStudent``)."""

    def __init__(self, feedback: bool = False, observe: str = "clean") -> None:
        from agent.teacher import BayesAgent

        self.agent = BayesAgent(plan=False)
        self.agent.configure(feedback=feedback, observe=observe)
        self.steps: dict[int, list[float]] = {}

    def reset(self, seed: int) -> None:
        self.agent.reset(int(seed))
        self.steps = {}

    def read(self, observation: dict[str, Any]) -> dict[int, list[float]]:
        self.agent.act(observation)
        self.steps[int(observation["t"])] = self.agent.filter_state(observation)
        return self.steps


def calendar_events(calendar) -> list[dict[str, Any]]:
    """A calendar week's fixed slots (28 action ids, ids >= 10 free) as prompt context items
    ``{"day", "slot", "action", "title"}``, the title being the action's name (the
    simulator's commitments have no other), in week order."""
    cal = np.asarray(calendar, dtype=np.int64).reshape(-1)
    out = []
    for t, a in enumerate(cal.tolist()):
        if 0 <= a < spec.N_ACTIONS:
            day, slot = divmod(t, spec.SLOTS_PER_DAY)
            name = spec.ACTIONS[a]
            out.append({"day": day, "slot": spec.SLOTS[slot], "action": name, "title": name})
    return out
