"""Stage 5b: calibrate how often the student chooses each action (an action bias in its GGUF).

A student trained on the teacher's weeks can still lean to some actions: teacher-forced on
held-out weeks of its own training mix, the bundled real-days student chose LEARN 12% more
often than the teacher and SOCIALIZE a third as often. This stage measures that lean on
teacher weeks it was not trained on and corrects it with one number per action, a logit
offset added to the action's first token when the answer starts (the action is the
answer's first token; :data:`agent.prompting.GGUF_ACTION_BIAS_KEY`, applied by
``agent.runtime.LlamaCppModel``). The weights are not touched: the output is a byte-for-byte
copy of the GGUF with one more metadata key.

1. Score every decision of the dataset's weeks (``--data``: a stage 2 dataset of teacher
   weeks the model did not train on, both splits), teacher-forced, as the product shows it:
   the logits of the ten actions' first tokens (``training.batches.action_logits``).
2. Split the weeks at random: ``--check-share`` of them are kept apart to judge the bias.
3. Fit the bias on the rest. ``--objective nll`` (default): the offsets that minimise the
   cross-entropy of the teacher's actions (convex; at the optimum the mean predicted
   probability of every action equals the teacher's share of it), with an L2 penalty
   ``--l2``. ``--objective counts``: offsets moved until the greedy choice's count of each
   action matches the teacher's (multiplicative steps on the count ratio).
4. Report on the check weeks, before and after: agreement with the teacher (greedy among
   the ten actions, as the grammar decodes), cross-entropy, and each action's count beside
   the teacher's; ``calibration.png`` draws the counts.
5. Write ``student-q8_0.gguf`` (the input's name), the input with the bias in its metadata,
   ``calibration.json`` and ``scores.npz`` (every decision's ten logits, the teacher's token
   and its week; ``--scores`` fits again from it without scoring). ``--max-bias`` caps each
   offset's size.

    python -m training.calibrate --model rhythm/models/student-real-q8_0.gguf --data runs/cal/dataset --out runs/cal/calibrated
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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
    sha256_file,
)


@dataclass
class Args:
    """Fit an action bias for a student GGUF on held-out teacher weeks."""

    model: str = help_field("rhythm/models/student-real-q8_0.gguf", "student GGUF to calibrate")
    data: str = help_field(
        "runs/manual/dataset", "stage 2 dataset of teacher weeks the model was not trained on"
    )
    out: str = help_field("runs/manual/calibrated", "output folder (GGUF, calibration.json, plot)")
    objective: str = help_field("nll", "nll (cross-entropy of the teacher's actions) or counts")
    check_share: float = help_field(0.3, "share of the weeks kept apart to judge the bias")
    l2: float = help_field(1e-3, "L2 penalty on the offsets (objective nll)")
    max_bias: float = help_field(2.0, "largest offset size, in logits")
    batch_size: int = help_field(8, "weeks per forward pass")
    scores: str = help_field(
        "", "scores.npz of an earlier run on the same model and data: skip the scoring"
    )
    seed: int = help_field(0, "seed of the fit/check split")


def softmax_nll(logits: np.ndarray, y: np.ndarray, bias: np.ndarray) -> float:
    z = logits + bias
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def fit_nll(logits: np.ndarray, y: np.ndarray, l2: float, iters: int = 500,
            bound: float | None = None) -> np.ndarray:
    """Offsets (mean 0, each within ``bound`` if given) minimising mean cross-entropy +
    ``l2`` * |b|^2: Newton steps (the Hessian of the cross-entropy in b is the mean of
    diag(p) - p p^T), each halved until the objective falls, so the result is never worse
    than no offset (a peaked model's near-singular Hessian once sent plain Newton far off)."""
    k = logits.shape[1]
    onehot = np.eye(k)[y]

    def objective(b: np.ndarray) -> float:
        return softmax_nll(logits, y, b) + l2 * float(b @ b)

    def feasible(b: np.ndarray) -> np.ndarray:
        b = b - b.mean()  # the cross-entropy does not see a shift of every offset
        return b if bound is None else np.clip(b, -bound, bound)

    b = np.zeros(k)
    f = objective(b)
    for _ in range(iters):
        z = logits + b
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        grad = (p - onehot).mean(axis=0) + 2 * l2 * b
        hess = np.diag(p.mean(axis=0)) - p.T @ p / len(p) + 2 * l2 * np.eye(k) + 1e-9 * np.eye(k)
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-6:
            cand = feasible(b - t * step)
            fc = objective(cand)
            if fc <= f:
                break
            t /= 2
        else:
            break  # no step lowers the objective: b is the optimum within reach
        moved = np.abs(cand - b).max()
        b, f = cand, fc
        if moved < 1e-7:
            break
    return b


def fit_counts(logits: np.ndarray, y: np.ndarray, iters: int = 400, rate: float = 0.2) -> np.ndarray:
    """Offsets that bring the greedy count of each action to the teacher's (log-ratio steps)."""
    k = logits.shape[1]
    want = np.bincount(y, minlength=k) + 1.0
    b = np.zeros(k)
    for _ in range(iters):
        got = np.bincount((logits + b).argmax(axis=1), minlength=k) + 1.0
        b += rate * np.log(want / got)
    return b - b.mean()


def action_token_ids(tok) -> list[int]:
    """The first token of each action's name, in action order (the token a decision's logits
    are read at); each action must start with its own token."""
    from simulator import spec

    first = [tok.encode(a, add_special_tokens=False).ids[0] for a in spec.ACTIONS]
    if len(set(first)) != len(first):
        raise ValueError("the vocabulary does not start each action with its own token")
    return first


def check_split(n_weeks: int, share: float, seed: int) -> np.ndarray:
    """Which weeks are kept apart to judge an offset (bool per week; the rest fit it)."""
    return np.random.default_rng(seed).random(n_weeks) < share


def judge(logits: np.ndarray, y: np.ndarray, bias: np.ndarray, actions: list[str]) -> dict[str, Any]:
    """Greedy picks against the teacher's, and ``sampled``: the expectation if the model drew
    its action from its softmax instead (agreement = mean probability of the teacher's pick;
    counts = the summed probabilities). A calibrated model's sampled counts match the
    teacher's; greedy trades that for agreement, over-choosing each region's likelier pick."""
    z = logits + bias
    pick = z.argmax(axis=1)
    k = len(actions)
    p = np.exp(z - z.max(axis=1, keepdims=True)) if len(y) else np.zeros((0, k))
    p /= np.maximum(p.sum(axis=1, keepdims=True), 1e-300)
    return {
        "decisions": int(len(y)),
        "agreement": float((pick == y).mean()) if len(y) else float("nan"),
        "nll": softmax_nll(logits, y, bias) if len(y) else float("nan"),
        "counts": dict(zip(actions, np.bincount(pick, minlength=k).tolist(), strict=True)),
        "sampled": {
            "agreement": float(p[np.arange(len(y)), y].mean()) if len(y) else float("nan"),
            "counts": dict(zip(actions, np.round(p.sum(axis=0), 1).tolist(), strict=True)),
        },
    }


def plot(report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    actions = list(report["teacher_counts"])
    x = np.arange(len(actions))
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for i, (label, counts) in enumerate(
        (
            ("teacher", report["teacher_counts"]),
            (f"student ({report['before']['agreement']:.3f})", report["before"]["counts"]),
            (f"calibrated ({report['after']['agreement']:.3f})", report["after"]["counts"]),
        )
    ):
        ax.bar(x + (i - 1) * 0.27, [counts[a] for a in actions], width=0.27, label=label)
    ax.set_xticks(x, [a.replace("_", "\n") for a in actions], fontsize=7)
    ax.set_ylabel("decisions (check weeks)")
    ax.set_title("How often each action is chosen: teacher, student, calibrated student")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(args: Args, progress: Progress = no_progress) -> dict[str, Any]:
    import torch

    from agent.prompting import FORMAT_V4, FORMAT_V6, GGUF_ACTION_BIAS_KEY, format_action_bias
    from simulator import spec
    from training.batches import action_logits, load_split, prompt_format_of
    from training.checkpoints import gguf_prompt_format, load_gguf_student
    from training.gguf_writer import with_metadata

    if args.objective not in ("nll", "counts"):
        raise ValueError(f"objective must be nll or counts, got {args.objective!r}")
    if not 0.0 < args.check_share < 1.0:
        raise ValueError("check_share must be between 0 and 1")
    seed_everything(args.seed)
    quiet_libraries()
    torch.set_num_threads(2)
    src = Path(args.model)
    fmt = gguf_prompt_format(src)
    data_fmt = prompt_format_of(args.data)
    if data_fmt != fmt and not (fmt == FORMAT_V6 and data_fmt == FORMAT_V4):  # a v6 model reads v4 weeks
        raise ValueError(f"{args.data} is in {data_fmt!r}, the model reads {fmt!r}")
    out = prepare_output(args.out, "calibrate", args, [src])
    model, tok = load_gguf_student(src)
    actions = list(spec.ACTIONS)
    first = action_token_ids(tok)
    to_action = {t: i for i, t in enumerate(first)}

    model_sha = sha256_file(src)
    if args.scores:
        with np.load(args.scores) as saved:
            if str(saved["model_sha256"]) != model_sha:
                raise ValueError(f"{args.scores} scored another model")
            z, t, w, offset = saved["logits"], saved["targets"], saved["weeks"], int(saved["n_weeks"])
    else:
        logits, targets, weeks = [], [], []
        offset = 0
        for name in ("train", "val"):
            split = load_split(args.data, name)
            if split is None:
                continue
            idx = np.arange(len(split["ids"]))
            log(f"scoring {len(idx)} {name} weeks")
            rows, zz, tt = action_logits(model, split, idx, np.array(first), args.batch_size)
            logits.append(zz)
            targets.append(tt)
            weeks.append(rows + offset)
            offset += len(idx)
            progress("calibrate", offset, None)
        z, t, w = np.concatenate(logits), np.concatenate(targets), np.concatenate(weeks)
    known = np.isin(t, first)  # a target outside the ten would be a broken dataset
    if not known.all():
        raise ValueError(f"{int((~known).sum())} decisions whose first answer token is no action")
    np.savez(out / "scores.npz", logits=z, targets=t, weeks=w, n_weeks=offset, model_sha256=model_sha)
    z = z.astype(np.float64)
    y = np.array([to_action[int(v)] for v in t])

    check_weeks = check_split(offset, args.check_share, args.seed)
    on_check = check_weeks[w]
    fit_z, fit_y, chk_z, chk_y = z[~on_check], y[~on_check], z[on_check], y[on_check]
    bias = fit_nll(fit_z, fit_y, args.l2, bound=args.max_bias) if args.objective == "nll" else fit_counts(fit_z, fit_y)
    bias = np.clip(bias, -args.max_bias, args.max_bias)
    zero = np.zeros(len(actions))
    report = {
        "model": str(src),
        "prompt_format": fmt,
        "objective": args.objective,
        "weeks": {"fit": int(offset - check_weeks.sum()), "check": int(check_weeks.sum())},
        "bias": dict(zip(actions, np.round(bias, 4).tolist(), strict=True)),
        "teacher_counts": dict(zip(actions, np.bincount(chk_y, minlength=len(actions)).tolist(), strict=True)),
        "before": judge(chk_z, chk_y, zero, actions),
        "after": judge(chk_z, chk_y, bias, actions),
        "fit": {"before": judge(fit_z, fit_y, zero, actions), "after": judge(fit_z, fit_y, bias, actions)},
    }
    gguf = with_metadata(src, out / src.name, {GGUF_ACTION_BIAS_KEY: format_action_bias(report["bias"])})
    (out / "calibration.json").write_text(json.dumps(report, indent=2) + "\n")
    png = plot(report, out / "calibration.png")
    b, a = report["before"], report["after"]
    log(
        f"check weeks ({a['decisions']} decisions): agreement {b['agreement']:.3f} -> {a['agreement']:.3f}, "
        f"cross-entropy {b['nll']:.3f} -> {a['nll']:.3f}, sampled instead of greedy "
        f"{b['sampled']['agreement']:.3f}; bias "
        + ", ".join(f"{k} {v:+.2f}" for k, v in report["bias"].items())
    )
    finish_output(out, {"check": {"before": b, "after": a}, "bias": report["bias"]}, [gguf, png])
    return {"gguf": str(gguf), **report}


if __name__ == "__main__":
    main(parse_args(Args))
