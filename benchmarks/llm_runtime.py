"""Benchmark: a GGUF model deciding through LLMPolicy on simulator episodes.

    .venv/bin/python benchmarks/llm_runtime.py                  # the tiny random test model
    .venv/bin/python benchmarks/llm_runtime.py --model PATH.gguf --form chat --episodes 1

Reports the load time, milliseconds per decision (``LLMPolicy.act``: prompt rendering +
llama.cpp, greedy and grammar-constrained + parsing) and of that in llama.cpp, prompt tokens
per decision and per step of history, and the count of invalid outputs. (The token counts
are taken outside the timings.) Without ``--model`` it builds the 2-layer, 64-wide random-weight
Llama of the tests (``lab/people/tiny_gguf.py``) in a temporary folder: its speed is
that of the runtime, not of a useful model. Needs the ml extra.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agent.lab.llm_policy import LLMPolicy  # noqa: E402
from agent.prompting import render_compact  # noqa: E402
from agent.runtime import LlamaCppModel  # noqa: E402
from simulator import spec  # noqa: E402
from simulator.env import RhythmEnv  # noqa: E402


class TimedModel:
    """Wraps a LlamaCppModel: times each complete(), then counts its prompt tokens."""

    def __init__(self, model: LlamaCppModel):
        self.model = model
        self.ms: list[float] = []
        self.prompt_tokens: list[int] = []
        self.counting_ms = 0.0

    def complete(self, prompt, *, grammar=None, max_tokens=16):
        start = time.perf_counter()
        out = self.model.complete(prompt, grammar=grammar, max_tokens=max_tokens)
        self.ms.append((time.perf_counter() - start) * 1000.0)
        # Counting tokens is outside complete()'s timing but inside act()'s: subtract it.
        start = time.perf_counter()
        if isinstance(prompt, str):
            self.prompt_tokens.append(self.model.n_tokens(prompt))
        else:
            self.prompt_tokens.append(sum(self.model.n_tokens(m["content"]) for m in prompt))
        self.counting_ms += (time.perf_counter() - start) * 1000.0
        return out


def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.model) if args.model else None
        if path is None:
            from lab.people.tiny_gguf import build_tiny_gguf

            path, _ = build_tiny_gguf(Path(tmp) / "tiny.gguf")
        model = LlamaCppModel(path, n_ctx=args.n_ctx, n_threads=args.n_threads)
        start = time.perf_counter()
        model.n_tokens("warm up")  # loads the model
        load_ms = (time.perf_counter() - start) * 1000.0
        timed = TimedModel(model)
        policy = LLMPolicy(timed, form=args.form)
        env = RhythmEnv()
        episode_ms, decision_ms, scores, last_prompt = [], [], [], ""
        for seed in range(args.episodes):
            obs, _ = env.reset(seed=seed)
            policy.reset(seed)
            first = len(decision_ms)
            done = False
            while not done:
                t0, counted = time.perf_counter(), timed.counting_ms
                action, belief = policy.act(obs)
                elapsed = (time.perf_counter() - t0) * 1000.0
                decision_ms.append(elapsed - (timed.counting_ms - counted))
                step = action if belief is None else {"action": action, "belief": belief}
                obs, _, done, _, info = env.step(step)
            episode_ms.append(sum(decision_ms[first:]))
            scores.append(info["final_score"])
            if args.form == "compact":
                last_prompt = render_compact(policy.history, None, policy.beliefs[:-1])
        full_tokens = model.n_tokens(last_prompt) if last_prompt else None
        result = {
            "model": str(args.model or "tiny random (2 layers x 64, f16)"),
            "form": args.form,
            "n_threads": args.n_threads,
            "episodes": args.episodes,
            "decisions": policy.decisions,
            "load_ms": round(load_ms, 1),
            "ms_per_decision_mean": round(statistics.mean(decision_ms), 2),
            "ms_per_decision_median": round(statistics.median(decision_ms), 2),
            "ms_per_decision_p95": round(sorted(decision_ms)[int(0.95 * len(decision_ms))], 2),
            "ms_in_llama_cpp_mean": round(statistics.mean(timed.ms), 2),
            "ms_per_episode_mean": round(statistics.mean(episode_ms), 1),
            "prompt_tokens_mean": round(statistics.mean(timed.prompt_tokens), 1),
            "prompt_tokens_last": timed.prompt_tokens[-1],
            "week_prompt_tokens": full_tokens,
            "tokens_per_step": (
                round(full_tokens / (spec.EPISODE_STEPS - 1), 1) if full_tokens else None
            ),
            "invalid_outputs": policy.invalid_outputs,
            "final_score_mean": round(statistics.mean(scores), 3),
        }
        model.close()
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF file (default: build the tiny test model)")
    parser.add_argument("--form", choices=("compact", "chat"), default="compact")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--n-threads", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>24}  {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
