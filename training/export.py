"""Stage 5: export the student to GGUF, quantize it, and check greedy parity with PyTorch.

1. Load the checkpoint (stage 3, or stage 4 with ``--adapter``: the LoRA is merged with peft;
   training/checkpoints.py).
2. Write an f32 GGUF with :func:`training.gguf_writer.write_llama_gguf` (the ``gguf`` package's
   writer; q/k permuted for llama.cpp, ``tokenizer.ggml.pre = "gpt-2"``, tied output,
   ``<|endoftext|>`` as BOS (added to every prompt) and EOS). Nothing is fetched.
3. Quantize it with llama-cpp-python's ``llama_model_quantize`` to each requested type
   (default f16, q8_0, q4_0). Hidden and FFN widths must be multiples of 32 for Q8_0/Q4_0 and
   256 for K-quants, or llama.cpp falls back to another type for those tensors.
4. Parity: on fixed prompts (held-out teacher episodes, several steps each), the greedy
   grammar-constrained answer of every GGUF under llama.cpp is compared with the PyTorch
   model's (training/student.py decodes the same way). ``parity.json`` records the share of
   equal actions and of equal whole answers, per file.

    python -m training.export --checkpoint runs/manual/sft/checkpoint --data runs/manual/dataset --out runs/manual/export
"""

from __future__ import annotations

import ctypes
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.checkpoints import checkpoint_prompt_format, load_student, write_gguf
from training.common import (
    Progress,
    finish_output,
    help_field,
    log,
    no_progress,
    parse_args,
    prepare_output,
    quiet_libraries,
    seed_everything,
    silence_llama_cpp,
)
from training.weeks import read_rollouts

QUANT_TYPES = {
    "f16": "LLAMA_FTYPE_MOSTLY_F16",
    "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
    "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
    "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
}


@dataclass
class Args:
    """GGUF export, quantization and parity check."""

    checkpoint: str = help_field(
        "runs/manual/sft/checkpoint", "student checkpoint folder (stage 3)"
    )
    adapter: str = help_field("", "LoRA adapter folder to merge first (stage 4), optional")
    data: str = help_field(
        "runs/manual/dataset", "dataset folder (val_episodes.jsonl gives the parity prompts)"
    )
    out: str = help_field("runs/manual/export", "output folder for the GGUF files and parity.json")
    quants: list[str] = help_field(
        ["f16", "q8_0", "q4_0"], "types to quantize to (f16, q8_0, q4_0, q4_k_m)"
    )
    parity_episodes: int = help_field(8, "held-out episodes the parity prompts come from")
    parity_steps: list[int] = help_field(
        [0, 3, 7, 13, 20, 27], "steps of each episode at which to prompt"
    )
    n_ctx: int = help_field(2048, "llama.cpp context for the check")
    seed: int = help_field(0, "seed")


def quantize(src: Path, dst: Path, kind: str, threads: int = 2) -> Path:
    import llama_cpp

    silence_llama_cpp()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANT_TYPES[kind])
    params.nthread = threads
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0 or not dst.exists():
        raise RuntimeError(f"llama_model_quantize {kind} failed (rc={rc})")
    return dst


def parity_prompts(
    val_path: Path, episodes: int, steps: list[int], fmt: str = "rhythm v1"
) -> list[dict[str, Any]]:
    from training.weeks import week_prompt

    prompts = []
    for k, rec in enumerate(read_rollouts(val_path)):
        if k >= episodes:
            break
        n = len(rec["answers"]) if "answers" in rec else len(rec["actions"])
        for t in steps:
            if 0 <= t < n:
                prompt, action = week_prompt(rec, t, fmt)
                prompts.append(
                    {"seed": rec["seed"], "t": t, "teacher_action": action, "prompt": prompt}
                )
    return prompts


def check_parity(
    torch_answers: list[str], gguf: Path, prompts: list[dict[str, Any]], n_ctx: int
) -> dict[str, Any]:
    from agent.prompting import OUTPUT_GBNF, parse_output
    from agent.runtime import LlamaCppModel

    llm = LlamaCppModel(gguf, n_ctx=n_ctx, n_threads=1)
    same_action = same_text = valid = 0
    times = []
    mismatches = []
    for p, ref in zip(prompts, torch_answers, strict=True):
        t0 = time.perf_counter()
        ans = llm.complete(p["prompt"], grammar=OUTPUT_GBNF, max_tokens=24, belief_median=True)
        times.append(time.perf_counter() - t0)
        a, b = parse_output(ans), parse_output(ref)
        valid += a.valid
        same_action += a.valid and b.valid and a.action_id == b.action_id
        same_text += ans.strip() == ref.strip()
        if ans.strip() != ref.strip() and len(mismatches) < 5:
            mismatches.append({"seed": p["seed"], "t": p["t"], "torch": ref, "llama_cpp": ans})
    llm.close()
    n = len(prompts)
    return {
        "file": str(gguf),
        "bytes": gguf.stat().st_size,
        "prompts": n,
        "valid": valid / n,
        "action_agreement": same_action / n,
        "answer_agreement": same_text / n,
        "ms_per_prompt_cold": 1000 * sum(times) / n,
        "mismatches": mismatches,
    }


def main(args: Args, progress: Progress = no_progress) -> dict[str, Any]:
    import torch

    from training.student import TorchStudent

    seed_everything(args.seed)
    quiet_libraries()
    torch.set_num_threads(2)
    ck = Path(args.checkpoint)
    out = prepare_output(
        args.out, "export", args, [ck / "model.safetensors", ck / "tokenizer.json"]
    )
    model = load_student(ck, args.adapter)
    if args.adapter:  # the merged model is a checkpoint of its own (PyTorch reference)
        merged = out / "merged"
        model.save_pretrained(merged)
        (merged / "tokenizer.json").write_bytes((ck / "tokenizer.json").read_bytes())
        if (ck / "checkpoint.json").exists():
            (merged / "checkpoint.json").write_bytes((ck / "checkpoint.json").read_bytes())
        ck = merged
    total = 2 + len(args.quants)
    fmt = checkpoint_prompt_format(ck)
    f32 = write_gguf(model, ck / "tokenizer.json", out / "student-f32.gguf", fmt)
    progress("export", 1, total)
    files = {"f32": f32}
    for i, kind in enumerate(args.quants):
        files[kind] = quantize(f32, out / f"student-{kind}.gguf", kind)
        progress("export", 2 + i, total)

    prompts = parity_prompts(
        Path(args.data) / "val_episodes.jsonl", args.parity_episodes, args.parity_steps, fmt
    )
    student = TorchStudent(ck, threads=1)
    torch_answers = [student.complete(p["prompt"]) for p in prompts]
    labelled = [(a, p) for a, p in zip(torch_answers, prompts, strict=True) if p["teacher_action"] is not None]
    teacher_agree = sum(
        a.split(" ", 1)[0] == __import__("simulator").spec.ACTIONS[p["teacher_action"]]
        for a, p in labelled
    ) / max(1, len(labelled))
    results = {
        kind: check_parity(torch_answers, path, prompts, args.n_ctx) for kind, path in files.items()
    }
    progress("export", total, total)
    report = {
        "checkpoint": str(args.checkpoint),
        "adapter": args.adapter or None,
        "prompts": len(prompts),
        "torch_teacher_action_agreement": teacher_agree,
        "files": results,
    }
    (out / "parity.json").write_text(json.dumps(report, indent=2) + "\n")
    finish_output(
        out,
        {
            k: {
                "bytes": v["bytes"],
                "action_agreement": v["action_agreement"],
                "answer_agreement": v["answer_agreement"],
            }
            for k, v in results.items()
        },
        list(files.values()),
    )
    for kind, r in results.items():
        log(
            f"export {kind}: {r['bytes'] / 1e6:.2f} MB, parity actions {r['action_agreement']:.3f}, answers {r['answer_agreement']:.3f}"
        )
    return report


if __name__ == "__main__":
    main(parse_args(Args, description=__doc__))
