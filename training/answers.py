"""Refine a shipped GGUF student on one person's answered recommendations.

The product's student ships as a quantized GGUF only. :func:`refine_gguf` reads it back into
PyTorch (transformers' GGUF loader dequantizes the weights; the GPT-2 tokenizer comes from
the GGUF's own vocabulary and merges), trains LoRA matrices for a few steps on
``(prompt, answer)`` examples (the loss on the answer tokens only, as stage 3), merges them,
and writes a new Q8_0 GGUF with the same prompt format. The examples come from
:func:`agent.hindsight.answer_targets` (the person's answers with hindsight); the caller
decides where the result is installed (``rhythm.refine``).

Needs the ``ml`` extra (torch, transformers, peft, llama-cpp-python).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from training.checkpoints import gguf_prompt_format, gguf_string, load_gguf_student
from training.common import Progress, no_progress, seed_everything
from training.tokens import EOS


@dataclass(frozen=True)
class Example:
    """The prompt the student saw (or would see) and the answer it should give there."""

    prompt: str
    answer: str
    weight: float = 1.0  # how hard the example pulls: 1 for a typed answer, an implicit one its confidence


@dataclass
class RefineSettings:
    steps: int = 30
    lr: float = 1e-3
    rank: int = 8
    alpha: int = 16
    batch_size: int = 2
    minutes: float = 10.0
    threads: int = 1  # measured: 2 threads were 4x slower on a busy 2-core machine
    seed: int = 0


def encode_example(tok, ex: Example) -> tuple[np.ndarray, np.ndarray]:
    """Token ids (BOS first) of prompt + answer, and the mask of the answer's tokens."""
    text = ex.prompt + ex.answer
    enc = tok.encode(text, add_special_tokens=False)
    start = len(ex.prompt)
    mask = np.array([e > start for _, e in enc.offsets], dtype=bool)
    ids = np.array([tok.token_to_id(EOS), *enc.ids], dtype=np.int64)
    return ids, np.concatenate([[False], mask])


def _answer_loss(model, ids, mask):
    import torch

    x = torch.from_numpy(ids)[None, :]
    logits = model(input_ids=x).logits[0, :-1]
    target = x[0, 1:]
    m = torch.from_numpy(mask[1:])
    return torch.nn.functional.cross_entropy(logits[m], target[m])


def mean_answer_loss(model, encoded) -> float:
    import torch

    with torch.no_grad():
        return float(np.mean([_answer_loss(model, i, m).item() for i, m in encoded])) if encoded else float("nan")


def refine_gguf(
    base: Path,
    examples: list[Example],
    out_dir: Path,
    settings: RefineSettings | None = None,
    progress: Progress = no_progress,
) -> dict[str, Any]:
    """Train LoRA on ``examples`` from the GGUF ``base``; write ``out_dir/student-q8_0.gguf``.

    Returns a report: steps, seconds, answer loss before and after, the files written."""
    import torch
    from peft import LoraConfig, get_peft_model

    from agent.prompting import GGUF_ACTION_BIAS_KEY
    from training.checkpoints import write_gguf
    from training.export import quantize

    s = settings or RefineSettings()
    if not examples:
        raise ValueError("no examples to refine on")
    if any(not 0.0 < float(ex.weight) <= 1.0 for ex in examples):
        raise ValueError("an example's weight is outside (0, 1]")
    seed_everything(s.seed)
    torch.set_num_threads(s.threads)
    base = Path(base)
    fmt = gguf_prompt_format(base) or "rhythm v1"
    model, tok = load_gguf_student(base)
    encoded = [encode_example(tok, ex) for ex in examples]
    if any(not m.any() for _, m in encoded):
        raise ValueError("an example's answer has no tokens")
    lora = LoraConfig(
        r=s.rank,
        lora_alpha=s.alpha,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        bias="none",
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(model, lora)
    inner = peft_model.base_model.model
    inner.eval()
    before = mean_answer_loss(inner, encoded)
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=s.lr)
    rng = np.random.default_rng(s.seed)
    t0 = time.time()
    inner.train()
    steps = 0
    for step in range(1, s.steps + 1):
        batch = rng.choice(len(encoded), size=min(s.batch_size, len(encoded)), replace=False)
        opt.zero_grad(set_to_none=True)
        # an answer read from the data pulls by its confidence (rhythm.refine gives the weights)
        loss = sum(float(examples[i].weight) * _answer_loss(inner, *encoded[i]) for i in batch) / len(batch)
        loss.backward()
        opt.step()
        steps = step
        progress("refine", step, s.steps)
        if time.time() - t0 > s.minutes * 60:
            break
    inner.eval()
    after = mean_answer_loss(inner, encoded)
    merged = peft_model.merge_and_unload()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / "work"
    work.mkdir(exist_ok=True)
    tok_path = work / "tokenizer.json"
    tok_path.write_text(tok.to_str())
    # the base's action bias (training.calibrate) stays: it corrects the population's lean,
    # the LoRA moves the raw scores toward this person
    bias = gguf_string(base, GGUF_ACTION_BIAS_KEY)
    extra = {} if bias is None else {GGUF_ACTION_BIAS_KEY: bias}
    f32 = write_gguf(merged, tok_path, work / "student-f32.gguf", fmt, extra)
    q8 = quantize(f32, out_dir / "student-q8_0.gguf", "q8_0")
    shutil.rmtree(work)
    report = {
        "base": str(base),
        "prompt_format": fmt,
        "examples": len(examples),
        "steps": steps,
        "seconds": round(time.time() - t0, 1),
        "answer_loss_before": round(before, 4),
        "answer_loss_after": round(after, 4),
        "model": str(q8),
        "bytes": q8.stat().st_size,
    }
    (out_dir / "refine.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
