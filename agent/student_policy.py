"""The distilled student as a simulator policy in every mode (feedback.md).

:class:`StudentPolicy` wraps :class:`agent.llm_policy.LLMPolicy` (compact prompt, GBNF
answer) so ``rhythm sim eval --policy student`` runs with or without feedback and under
every observation condition:

- **Answers** become the prompt's feedback lines (``fb d1 morning DEEP_WORK ignored``; the
  last :data:`agent.prompting.MAX_FEEDBACK`), the context the product gives it too.
- **Missing readings.** The compact prompt shows numbers only, so what the student reads is
  a view of the observation: a missing meter shows its last reading (the spec's initial
  meters before any), a missing delta, anomaly or reward shows 0, and an applied action
  that was not observed (an ignored recommendation in the answers-only condition) shows the
  recommendation (its feedback line says it was ignored). The student was trained on clean
  weeks only, so this measures how it copes, not a trained skill.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from agent.llm_policy import LLMPolicy
from agent.prompting import MAX_FEEDBACK
from agent.runtime import LlamaCppModel, Model
from simulator import spec
from simulator.feedback import check_observe

_RESPONSES = {1: "accepted", 2: "ignored"}


class StudentPolicy:
    """A language-model student in any feedback / observation mode (module docstring)."""

    def __init__(self, model: Model, max_tokens: int = 24) -> None:
        self.llm = LLMPolicy(model, form="compact", max_tokens=max_tokens)
        self.feedback = False
        self.observe = "clean"
        self.reset(0)

    @classmethod
    def from_gguf(cls, path: str | Path, n_ctx: int = 2048) -> StudentPolicy:
        return cls(LlamaCppModel(path, n_ctx=n_ctx, n_threads=1))

    def configure(self, feedback: bool = False, observe: str = "clean") -> None:
        self.feedback = bool(feedback)
        self.observe = check_observe(observe)

    def reset(self, seed: int) -> None:
        self.llm.reset(seed)
        self.llm.set_context(None)
        self._answers: list[dict[str, Any]] = []
        self._seen = np.array(spec.INITIAL_METERS, dtype=np.float64)

    def view(self, obs: dict[str, Any]) -> dict[str, Any]:
        """The observation as the student's prompt shows it (module docstring)."""
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
            self.reset(0)
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
        if self._answers:
            self.llm.set_context({"feedback": self._answers[-MAX_FEEDBACK:]})
        return self.llm.act(self.view(observation))
