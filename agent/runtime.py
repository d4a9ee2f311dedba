"""The model runtime: one method, a llama.cpp backend, a scripted fake (STYLE rule 10).

- :class:`Model` is the whole interface: ``complete(prompt, grammar=..., max_tokens=...)``,
  where ``prompt`` is plain text or chat messages (``[{"role", "content"}]``).
- :class:`LlamaCppModel` runs any local GGUF through llama-cpp-python; nothing happens until
  the first ``complete()``, which opens the file. Greedy decoding (temperature 0), so the
  same prompt gives the same answer; a GBNF grammar constrains the output. A GGUF that
  carries an action bias (``rhythm.action_bias``, ``training.calibrate``) has it added to
  the actions' first tokens at the start of every answer.
- :class:`ScriptedModel` returns scripted outputs and records every call (tests).
- :func:`load_model` is the factory the app uses with ``Settings.model_path``
  (``RHYTHM_MODEL_PATH``).

Every failure to load or run a model is a :class:`common.errors.ModelError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from common.errors import ModelError

Prompt = str | list[dict[str, str]]
GGUF_MAGIC = b"GGUF"


@runtime_checkable
class Model(Protocol):
    def complete(self, prompt: Prompt, *, grammar: str | None = None, max_tokens: int = 16) -> str:
        """The model's continuation of ``prompt`` (text) or its reply to ``prompt``
        (chat messages), constrained by the GBNF ``grammar`` when given."""
        ...


def check_gguf(path: str | Path) -> Path:
    """``path`` as a Path if it is a readable GGUF file (checks the magic bytes only);
    otherwise ModelError."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelError(f"model file not found: {p}")
    if not p.is_file():
        raise ModelError(f"model path is not a file: {p}")
    try:
        with p.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelError(f"cannot read model file {p}: {exc.strerror or exc}") from None
    if magic != GGUF_MAGIC:
        raise ModelError(f"not a GGUF file: {p}")
    return p


class LlamaCppModel:
    """A local GGUF under llama-cpp-python, loaded on the first :meth:`complete`.

    ``n_ctx``: context window in tokens (prompt + answer); ``n_threads``: CPU threads;
    ``seed``: llama.cpp's seed (decoding is greedy, so it only matters to models that
    sample). Chat prompts use the GGUF's own chat template (llama-cpp-python's default
    when it has none)."""

    def __init__(
        self, path: str | Path, n_ctx: int = 2048, n_threads: int = 1, seed: int = 0
    ) -> None:
        self.path = Path(path).expanduser()
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads)
        self.seed = int(seed)
        self._llm: Any = None
        self._grammars: dict[str, Any] = {}
        self._median: Any = None  # logits processor; False when the vocabulary has none
        self._bias: Any = None  # (token ids, offsets) of the action bias; False when none

    @property
    def loaded(self) -> bool:
        return self._llm is not None

    def _load(self) -> Any:
        if self._llm is not None:
            return self._llm
        path = check_gguf(self.path)
        llama_cpp = _import_llama_cpp()
        try:
            self._llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                seed=self.seed,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"llama.cpp could not load {path}: {exc}") from None
        return self._llm

    def _grammar(self, grammar: str) -> Any:
        cached = self._grammars.get(grammar)
        if cached is None:
            llama_cpp = _import_llama_cpp()
            try:
                cached = llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"invalid grammar: {exc}") from None
            self._grammars[grammar] = cached
        return cached

    #: :meth:`complete` takes ``belief_median`` (LLMPolicy asks for it where offered).
    supports_belief_median = True

    def _median_processor(self) -> Any:
        """A llama.cpp logits processor that makes each belief number the median of the
        model's distribution over ``00``..``99`` (:func:`agent.prompting.median_number`);
        None when the vocabulary lacks single-token two-digit numbers (general models)."""
        if self._median is not None:
            return self._median or None
        import re

        from agent.prompting import belief_digits_next, median_number

        llm = self._load()
        strings = [
            llm.detokenize([i]).decode("utf-8", "replace") for i in range(llm.n_vocab())
        ]
        digits = {int(t): i for i, t in enumerate(strings) if re.fullmatch(r"[0-9][0-9]", t)}
        if len(digits) != 100:
            self._median = False
            return None
        ids = np.array([digits[v] for v in range(100)])

        def processor(input_ids: Any, logits: Any) -> Any:
            tail = "".join(strings[int(t)] for t in input_ids[-4:])
            if not belief_digits_next(tail):
                return logits
            out = np.full_like(logits, -np.inf)
            out[ids[median_number(logits[ids])]] = 0.0
            return out

        self._median = _import_llama_cpp().LogitsProcessorList([processor])
        return self._median

    def action_bias(self) -> dict[str, float]:
        """The action bias the GGUF carries (key ``rhythm.action_bias``, written by
        ``training.calibrate``): logit offsets by action name, added to each action's first
        token at the first token of every completion; {} when it carries none. ModelError
        when the key is malformed or the vocabulary does not start each action with its own
        token (the bias could not be told apart)."""
        from agent.prompting import GGUF_ACTION_BIAS_KEY, parse_action_bias

        llm = self._load()
        text = (getattr(llm, "metadata", None) or {}).get(GGUF_ACTION_BIAS_KEY)
        if text is None:
            return {}
        try:
            return parse_action_bias(text)
        except ValueError as exc:
            raise ModelError(f"{self.path.name}: {exc}") from None

    def _bias_ids(self) -> tuple[np.ndarray, np.ndarray] | None:
        if self._bias is None:
            bias = self.action_bias()
            self._bias = False
            if bias:
                llm = self._load()
                ids = {a: llm.tokenize(a.encode("utf-8"), add_bos=False, special=False)[0] for a in bias}
                if len(set(ids.values())) != len(ids):
                    raise ModelError(f"{self.path.name}: action bias needs each action to start with its own token")
                self._bias = (np.array(list(ids.values())), np.array([bias[a] for a in ids], dtype=np.float32))
        return self._bias or None

    def _first_token_bias(self) -> Any:
        """A fresh logits processor adding the action bias at the completion's first token."""
        bias = self._bias_ids()
        if bias is None:
            return None
        ids, offsets = bias
        pending = [True]

        def processor(input_ids: Any, logits: Any) -> Any:
            if pending[0]:
                pending[0] = False
                logits[ids] += offsets
            return logits

        return processor

    def complete(
        self,
        prompt: Prompt,
        *,
        grammar: str | None = None,
        max_tokens: int = 16,
        belief_median: bool = False,
    ) -> str:
        """Greedy completion (under ``grammar``); ``belief_median``: belief numbers are the
        median of the model's distribution instead of its mode."""
        llm = self._load()
        g = self._grammar(grammar) if grammar is not None else None
        options = dict(
            max_tokens=int(max_tokens),
            temperature=0.0,
            top_k=1,
            repeat_penalty=1.0,
            grammar=g,
        )
        processors = []
        first = self._first_token_bias()
        if first is not None:
            processors.append(first)
        if belief_median and isinstance(prompt, str):
            processor = self._median_processor()
            if processor is not None:
                processors.extend(processor)
        if processors:
            options["logits_processor"] = _import_llama_cpp().LogitsProcessorList(processors)
        try:
            if isinstance(prompt, str):
                out = llm.create_completion(prompt, **options)
                return out["choices"][0]["text"] or ""
            out = llm.create_chat_completion(messages=list(prompt), **options)
            return out["choices"][0]["message"].get("content") or ""
        except (ValueError, AssertionError) as exc:
            # llama-cpp-python: ValueError when the prompt does not fit n_ctx; a bare assert
            # when the prompt is no tokens at all (an empty prompt and no BOS).
            detail = str(exc) or "empty prompt (no tokens)"
            raise ModelError(f"{self.path.name}: {detail}") from None

    @property
    def prompt_format(self) -> str | None:
        """The compact prompt format the GGUF says it was trained on (key
        ``rhythm.prompt_format``), None when it says nothing (loads the model)."""
        from agent.prompting import GGUF_FORMAT_KEY

        metadata = getattr(self._load(), "metadata", None) or {}
        return metadata.get(GGUF_FORMAT_KEY)

    def n_tokens(self, text: str) -> int:
        """How many tokens ``text`` is for this model (loads it)."""
        llm = self._load()
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def close(self) -> None:
        """Free the model (a later :meth:`complete` loads it again)."""
        if self._llm is not None:
            close = getattr(self._llm, "close", None)
            if close is not None:
                close()
            self._llm = None
            self._median = None
            self._bias = None

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        return f"LlamaCppModel({str(self.path)!r}, n_ctx={self.n_ctx}, {state})"


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise ModelError("llama-cpp-python is not installed: pip install 'rhythm[ml]'") from None
    return llama_cpp


@dataclass(frozen=True)
class Call:
    """One recorded :meth:`ScriptedModel.complete` call."""

    prompt: Prompt
    grammar: str | None
    max_tokens: int


class ScriptedModel:
    """A fake :class:`Model`: returns ``outputs`` in order and records each call in
    ``calls``. An output may be a callable ``prompt -> str``. When the script runs out it
    returns ``default``, or raises ModelError if ``default`` is None."""

    def __init__(
        self, outputs: Iterable[str | Callable[[Prompt], str]] = (), default: str | None = None
    ) -> None:
        self._outputs = list(outputs)
        self.default = default
        self.calls: list[Call] = []

    @property
    def prompts(self) -> list[Prompt]:
        return [c.prompt for c in self.calls]

    def complete(self, prompt: Prompt, *, grammar: str | None = None, max_tokens: int = 16) -> str:
        self.calls.append(Call(prompt, grammar, max_tokens))
        i = len(self.calls) - 1
        if i < len(self._outputs):
            out = self._outputs[i]
            return out(prompt) if callable(out) else out
        if self.default is None:
            raise ModelError(f"ScriptedModel has only {len(self._outputs)} outputs")
        return self.default


def load_model(
    path: str | Path | None, *, n_ctx: int = 2048, n_threads: int = 1, seed: int = 0
) -> Model:
    """The model for ``path`` (``Settings.model_path``): a lazily loaded
    :class:`LlamaCppModel`. Checks now that the file exists and is a GGUF (reads 4 bytes),
    so a wrong setting fails early with ModelError; the weights load on first use."""
    if path is None or str(path).strip() == "":
        raise ModelError("no model path: set model_path in config.toml or RHYTHM_MODEL_PATH")
    p = check_gguf(path)
    return LlamaCppModel(p, n_ctx=n_ctx, n_threads=n_threads, seed=seed)
