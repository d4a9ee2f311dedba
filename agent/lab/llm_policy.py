"""``LLMPolicy``: a language model behind the simulator's Policy protocol.

Each ``act(observation)`` appends the observation to the episode history, renders the whole
history (:func:`agent.prompting.render_compact` or :func:`~agent.prompting.render_chat`,
with the beliefs this policy emitted so far), asks the model for one line under
:data:`agent.prompting.OUTPUT_GBNF`, and parses it.

Invalid output (possible only for a model run without the grammar, or cut off by
``max_tokens``) never stops an episode: the policy falls back to the spec 9 heuristic's
action (:func:`simulator.policies.heuristic_action`) with no belief (so the last valid
belief stays the one graded), and counts it in ``invalid_outputs``. A model that cannot
load or run raises :class:`common.errors.ModelError`; that is not counted as invalid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from agent.prompting import (
    OUTPUT_GBNF,
    ParsedOutput,
    check_prompt_format,
    model_prompt_format,
    parse_output,
    render_chat,
    render_compact,
)
from agent.runtime import Model
from simulator.policies import heuristic_action

FORMS = ("compact", "chat")
#: Enough for ``ACTION b=N,N,N`` even when a tokenizer spells it one character a token.
DEFAULT_MAX_TOKENS = 48
#: Chat form: history rows shown (a full week of rows is ~1,500-2,000 tokens for general
#: tokenizers, too much for a 2,048-token context with the system message).
DEFAULT_CHAT_ROWS = 12


class LLMPolicy:
    """A :class:`simulator.policies.Policy` that asks ``model`` for every decision.

    ``form``: ``"compact"`` (small models trained on that text) or ``"chat"`` (general
    instruct models). ``context``: ``events``/``feedback`` for the real-data path (see
    :mod:`agent.prompting`); untrusted text is sanitised there. ``max_tokens``: the answer's
    budget. ``chat_rows``: history rows in the chat form (the compact form always shows the
    whole week). ``prompt_format``: the compact format (:data:`agent.prompting.PROMPT_FORMATS`);
    by default the model's own (its ``prompt_format`` attribute, read from the GGUF), else v1;
    a format this version does not render (a retired v2, v3 or v5 student) raises ValueError.
    ``belief_median``: where the model offers it (llama.cpp), each belief number is the median
    of the model's distribution over ``00``..``99`` rather than its mode (lower absolute error).

    Counters: ``decisions`` and ``invalid_outputs`` since construction, ``episode_invalid``
    in the current episode; ``last_prompt``, ``last_output`` and ``last_parsed`` keep the
    latest exchange for inspection."""

    def __init__(
        self,
        model: Model,
        form: str = "compact",
        context: Mapping[str, Any] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        chat_rows: int = DEFAULT_CHAT_ROWS,
        prompt_format: str | None = None,
        belief_median: bool = True,
    ) -> None:
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, got {form!r}")
        self._prompt_format = None if prompt_format is None else check_prompt_format(prompt_format)
        self.belief_median = bool(belief_median)
        self.model = model
        self.form = form
        self.context = context
        self.max_tokens = int(max_tokens)
        self.chat_rows = int(chat_rows)
        self.decisions = 0
        self.invalid_outputs = 0
        self.episode_invalid = 0
        self.last_prompt: Any = None
        self.last_output: str | None = None
        self.last_parsed: ParsedOutput | None = None
        self._history: list[dict[str, Any]] = []
        self._beliefs: list[tuple[float, float, float] | None] = []

    @property
    def prompt_format(self) -> str:
        """The compact prompt format in use (asks the model once: a GGUF loads then)."""
        if self._prompt_format is None:
            self._prompt_format = model_prompt_format(getattr(self.model, "prompt_format", None))
        return self._prompt_format

    @property
    def history(self) -> list[dict[str, Any]]:
        """The observations of the current episode so far."""
        return list(self._history)

    @property
    def beliefs(self) -> list[tuple[float, float, float] | None]:
        """The belief emitted at each decision of the current episode (None if invalid)."""
        return list(self._beliefs)

    def reset(self, seed: int) -> None:
        self._history = []
        self._beliefs = []
        self.episode_invalid = 0

    def set_context(self, context: Mapping[str, Any] | None) -> None:
        self.context = context

    def prompt(self) -> str | list[dict[str, str]]:
        """The prompt for the decision after the last observation seen."""
        if self.form == "compact":
            return render_compact(self._history, self.context, self._beliefs, fmt=self.prompt_format)
        return render_chat(self._history, self.context, self._beliefs, max_rows=self.chat_rows)

    def act(self, observation: dict[str, Any]) -> tuple[int, np.ndarray | None]:
        if self._history and int(observation["t"]) != int(self._history[-1]["t"]) + 1:
            # A new episode without reset(), or a skipped step: start over from here.
            self._history, self._beliefs = [], []
        self._history.append(dict(observation))
        prompt = self.prompt()
        options: dict[str, Any] = {"grammar": OUTPUT_GBNF, "max_tokens": self.max_tokens}
        if self.belief_median and getattr(self.model, "supports_belief_median", False):
            options["belief_median"] = True
        text = self.model.complete(prompt, **options)
        parsed = parse_output(text)
        self.decisions += 1
        self.last_prompt, self.last_output, self.last_parsed = prompt, text, parsed
        self._beliefs.append(parsed.belief)  # None when invalid
        if parsed.valid:
            return int(parsed.action_id), np.array(parsed.belief, dtype=np.float64)
        self.invalid_outputs += 1
        self.episode_invalid += 1
        return heuristic_action(observation["meters"], int(observation["slot"])), None
