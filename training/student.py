"""The PyTorch student as a simulator policy, with the same decoding as llama.cpp.

:class:`GrammarDecoder` is greedy decoding constrained to :data:`agent.prompting.OUTPUT_GBNF`
(``ACTION b=N,N,N``), token by token: the highest-scoring token whose text keeps the answer
a prefix of the grammar's language; it stops when the answer is complete (where llama.cpp's
grammar would allow only the end token). :class:`TorchStudent` keeps a KV cache across the
steps of an episode (the prompt of step t+1 extends that of step t), as llama.cpp does.
Used by training/export.py (parity) and training/evaluate.py.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import regex

from agent.lab.student_policy import FilterTrack
from agent.prompting import (
    WEEK_FORMATS,
    belief_digits_next,
    median_number,
    parse_output,
    render_compact,
)
from simulator import spec
from simulator.policies import heuristic_action
from training.checkpoints import checkpoint_prompt_format
from training.tokens import EOS, load_tokenizer

_NUM = r"(?:0?\.[0-9][0-9]|1\.00)"
ANSWER_PATTERN = regex.compile(rf"(?:{'|'.join(spec.ACTIONS)}) b={_NUM},{_NUM},{_NUM}")


class GrammarDecoder:
    """Token strings of a tokenizer, and the grammar check on them."""

    def __init__(self, tok) -> None:
        self.tok = tok
        self.eos = tok.token_to_id(EOS)
        n = tok.get_vocab_size()
        self.strings = [tok.decode([i], skip_special_tokens=False) for i in range(n)]
        self.strings[self.eos] = ""
        found = {int(t): i for i, t in enumerate(self.strings) if regex.fullmatch(r"[0-9][0-9]", t)}
        self.digits = np.array([found[v] for v in range(100)]) if len(found) == 100 else None

    def allowed(self, text: str, token: int) -> bool:
        s = self.strings[token]
        return bool(s) and ANSWER_PATTERN.fullmatch(text + s, partial=True) is not None

    @staticmethod
    def complete(text: str) -> bool:
        return ANSWER_PATTERN.fullmatch(text) is not None

    def pick(self, text: str, logits: np.ndarray, belief_median: bool = False) -> int:
        """The greedy grammar-allowed token for ``logits`` after answer prefix ``text``; with
        ``belief_median`` the two digits of a belief number are the median of the model's
        distribution over ``00``..``99`` (as :class:`agent.runtime.LlamaCppModel` does)."""
        if belief_median and self.digits is not None and belief_digits_next(text):
            return int(self.digits[median_number(logits[self.digits])])
        for token in np.argsort(-logits, kind="stable"):
            if self.allowed(text, int(token)):
                return int(token)
        raise RuntimeError(f"no token continues {text!r}")


class TorchStudent:
    """A simulator policy backed by a ``LlamaForCausalLM`` checkpoint (stage 3 output).

    Prompts are :func:`agent.prompting.render_compact` of the episode so far with the
    student's own beliefs (a v4 student: with the teacher's filter before each decision, run
    here as ``agent.lab.student_policy`` runs it); ``ms_per_decision`` accumulates timing."""

    def __init__(
        self,
        checkpoint: str | Path,
        threads: int = 1,
        max_tokens: int = 24,
        belief_median: bool = True,
    ) -> None:
        import torch
        from transformers import LlamaForCausalLM

        torch.set_num_threads(threads)
        self.model = LlamaForCausalLM.from_pretrained(str(checkpoint)).eval()
        self.tok = load_tokenizer(Path(checkpoint) / "tokenizer.json")
        self.decoder = GrammarDecoder(self.tok)
        self.prompt_format = checkpoint_prompt_format(checkpoint)
        self.bos = self.decoder.eos
        self.max_tokens = max_tokens
        self.belief_median = belief_median
        self.decisions = 0
        self.seconds = 0.0
        self.invalid_outputs = 0
        self._filter: FilterTrack | None = None
        self.reset(0)

    def reset(self, seed: int) -> None:
        self._seed = int(seed)
        if self.prompt_format in WEEK_FORMATS:  # the teacher's filter, as agent.lab.student_policy runs it
            if self._filter is None:
                self._filter = FilterTrack()
            self._filter.reset(self._seed)
        self._history: list[dict[str, Any]] = []
        self._beliefs: list[Any] = []
        self._ids: list[int] = []
        self._cache = None

    @property
    def ms_per_decision(self) -> float:
        return 1000.0 * self.seconds / max(1, self.decisions)

    def prompt_ids(self, prompt: str) -> list[int]:
        return [self.bos, *self.tok.encode(prompt).ids]

    def _forward(self, new: list[int]) -> np.ndarray:
        """Feed ``new`` tokens after the cached ones; logits of the last position."""
        import torch
        from transformers import DynamicCache

        if self._cache is None:
            self._cache = DynamicCache()
        out = self.model(
            input_ids=torch.tensor([new], dtype=torch.long),
            past_key_values=self._cache,
            use_cache=True,
        )
        self._cache = out.past_key_values
        self._ids.extend(new)
        return out.logits[0, -1].float().numpy()

    def complete_ids(self, ids: list[int]) -> str:
        """The greedy grammar-constrained answer after prompt ``ids`` (reuses the cache)."""
        import torch

        with torch.no_grad():
            common = 0
            for a, b in zip(self._ids, ids, strict=False):
                if a != b:
                    break
                common += 1
            common = min(common, len(ids) - 1)
            if self._cache is not None and common < len(self._ids):
                if common == 0:
                    self._cache = None
                else:
                    self._cache.crop(common - len(self._ids))  # negative: tokens to drop
                self._ids = self._ids[:common]
            logits = self._forward(ids[common:])
            text = ""
            for _ in range(self.max_tokens):
                token = self.decoder.pick(text, logits, self.belief_median)
                text += self.decoder.strings[token]
                if self.decoder.complete(text):
                    break
                logits = self._forward([token])
            return text

    def complete(self, prompt: str) -> str:
        return self.complete_ids(self.prompt_ids(prompt))

    def act(self, observation: dict[str, Any]):
        t0 = time.perf_counter()
        if self._history and int(observation["t"]) != int(self._history[-1]["t"]) + 1:
            self.reset(self._seed)
        self._history.append(dict(observation))
        context = None if self._filter is None else {"filters": self._filter.read(observation)}
        text = self.complete(
            render_compact(self._history, context, self._beliefs, fmt=self.prompt_format)
        )
        parsed = parse_output(text)
        self.decisions += 1
        self.seconds += time.perf_counter() - t0
        self._beliefs.append(parsed.belief)
        if parsed.valid:
            return int(parsed.action_id), np.array(parsed.belief, dtype=np.float64)
        self.invalid_outputs += 1
        return heuristic_action(observation["meters"], int(observation["slot"])), None
