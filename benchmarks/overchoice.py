"""Where a student's over-choice comes from: a prior, a soft boundary, or the label itself?

    .venv/bin/python benchmarks/overchoice.py                      # the bundled student, 40 new people
    .venv/bin/python benchmarks/overchoice.py --people 300 --json runs/x/overchoice.json
    .venv/bin/python benchmarks/overchoice.py --scores runs/cal/c/scores.npz \\
        --data runs/cal/ds_streams --rollouts runs/cal/streams/rollouts.jsonl   # an earlier calibrate run

Without ``--scores`` it makes its own held-out data: ``--people`` people of the stream
generator on seeds no training run uses (``rhythm train streams``), their weeks as a dataset
in the model's prompt format and tokenizer, and the model's teacher-forced action logits on
every decision (``training.calibrate``, whose scores.npz it then reads). With ``--scores`` it
reads the logits ``training.calibrate`` saved for a model on a dataset of teacher weeks the
model was not trained on. It maps every decision to its slot of the week (through the
dataset's seeds and the weeks' rollouts) and prints, on the same check weeks as
``training.calibrate`` (seed 0, 30% of the weeks):

1. **greedy against sampled**: agreement with the teacher and each action's count when the
   model takes its likeliest action, and in expectation when it draws from its softmax;
2. **per action**: decisions where only the model chooses it against those where only the
   teacher does (what ``benchmarks/student_real.py`` tests);
3. **offsets by group**: logit offsets fitted (cross-entropy, on the other weeks) for all
   decisions at once, per slot of the day, and per slot of the week, then judged on the check
   weeks: decisions won and lost against no offsets. If the over-choice were a prior of the
   model (or of a slot), an offset would remove it and win;
4. **afternoons by day**: the teacher's and the model's LEARN and MEDITATE, where the
   students' LEARN excess sits;
5. **a plain classifier** (``--mlp-epochs``, 0 to skip): a two-layer network on the numbers the
   prompt carries for the decision (the slot of the week, the filter's trait medians and sds
   and planning meters, the observed meters), trained on the other weeks: what a learner of
   those numbers reaches, and whether it over-chooses the same actions.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from simulator import spec  # noqa: E402
from training.calibrate import action_token_ids, check_split, fit_nll, judge  # noqa: E402

ACTIONS = list(spec.ACTIONS)


def decision_steps(weeks: np.ndarray, seeds: list[int], episodes: dict[int, dict[str, Any]]) -> np.ndarray:
    """The step of the week (0-27) of every scored decision: the ``k``-th decision of week
    ``w`` is the ``k``-th step with an answer in the episode of seed ``seeds[w]``; -1 where the
    episode is missing or its answers do not line up with the scores."""
    steps = np.full(len(weeks), -1, dtype=np.int64)
    for w in np.unique(weeks):
        rows = np.flatnonzero(weeks == w)
        ep = episodes.get(int(seeds[w]))
        answers = (ep or {}).get("answers")
        if not isinstance(answers, list):
            continue
        ts = [t for t, a in enumerate(answers) if a is not None]
        if len(ts) == len(rows):
            steps[rows] = ts
    return steps


def group_offsets(logits: np.ndarray, y: np.ndarray, groups: np.ndarray, fit: np.ndarray, l2: float) -> np.ndarray:
    """Per-decision offsets: one cross-entropy fit (``training.calibrate.fit_nll``) per group,
    on the ``fit`` decisions of that group (zero for a group without any)."""
    out = np.zeros_like(logits, dtype=np.float64)
    for g in np.unique(groups):
        m = groups == g
        if (m & fit).sum():
            out[m] = fit_nll(logits[m & fit], y[m & fit], l2)
    return out


def won_lost(base: np.ndarray, new: np.ndarray, y: np.ndarray) -> tuple[int, int]:
    return int(((new == y) & (base != y)).sum()), int(((new != y) & (base == y)).sum())


def over_chosen(pick: np.ndarray, y: np.ndarray) -> dict[str, tuple[int, int]]:
    """Each action the model chooses more often than the teacher: (only model, only teacher)."""
    out = {}
    for a, name in enumerate(ACTIONS):
        only_m, only_t = int(((pick == a) & (y != a)).sum()), int(((y == a) & (pick != a)).sum())
        if only_m > only_t:
            out[name] = (only_m, only_t)
    return out


def features(ep: dict[str, Any], t: int) -> list[float]:
    """The numbers the prompt carries for the decision at step ``t`` (no calendar, no text)."""
    onehot = [0.0] * spec.EPISODE_STEPS
    onehot[t] = 1.0
    filt = [float(x) for x in ep["filters"][t]]
    meters = ep["views"][t]["meters"]
    return onehot + filt + [0.0 if m is None else float(m) for m in meters] + [float(m is None) for m in meters]


def mlp(x: np.ndarray, y: np.ndarray, fit: np.ndarray, epochs: int, seed: int = 0) -> np.ndarray:
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                              torch.nn.ReLU(), torch.nn.Linear(256, spec.N_ACTIONS))
    opt = torch.optim.AdamW(net.parameters(), 1e-3, weight_decay=1e-4)
    idx = np.flatnonzero(fit)
    for _ in range(epochs):
        for b in np.array_split(np.random.default_rng(seed).permutation(idx), max(1, len(idx) // 256)):
            loss = torch.nn.functional.cross_entropy(net(xt[b]), yt[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        seed += 1
    with torch.no_grad():
        return net(xt).argmax(1).numpy()


def score_afresh(args: argparse.Namespace, work: Path) -> tuple[str, str, list[str]]:
    """New people's weeks, a dataset of them in the model's format and tokenizer, and the
    model's teacher-forced logits on them: ``(scores.npz, dataset, [rollouts.jsonl])``."""
    from lab.streams import write_streams
    from training import calibrate, dataset
    from training.checkpoints import gguf_prompt_format, load_gguf_student

    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    summary = write_streams(work / "streams", args.people, args.seed_start, args.workers)
    print(f"{summary['people']} people, {summary['weeks']} weeks, {summary['decisions']} teacher decisions "
          f"({time.time() - t0:.0f} s)", file=sys.stderr)
    _, tok = load_gguf_student(args.model)
    tok.post_processor = None  # the dataset appends no special tokens of its own
    tok.save(str(work / "tokenizer.json"))
    fmt = gguf_prompt_format(args.model)
    dataset.main(dataset.Args(rollouts=[str(work / "streams" / "rollouts.jsonl")], out=str(work / "dataset"),
                              tokenizer=str(work / "tokenizer.json"), prompt_format=fmt, val_fraction=0.5))
    calibrate.main(calibrate.Args(model=args.model, data=str(work / "dataset"), out=str(work / "calibrate")))
    print(f"scored in {time.time() - t0:.0f} s; weeks, dataset and scores in {work}", file=sys.stderr)
    return str(work / "calibrate" / "scores.npz"), str(work / "dataset"), [str(work / "streams" / "rollouts.jsonl")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scores", default="", help="scores.npz of training.calibrate (default: score afresh)")
    ap.add_argument("--data", default="", help="the dataset the scores were computed on (with --scores)")
    ap.add_argument("--rollouts", nargs="+", default=[], help="the rollouts.jsonl files of that dataset")
    ap.add_argument("--model", default=str(ROOT / "rhythm" / "models" / "student-real-q8_0.gguf"),
                    help="the student GGUF to score (without --scores)")
    ap.add_argument("--people", type=int, default=40, help="new people to score it on (without --scores)")
    ap.add_argument("--seed-start", type=int, default=95_000_000, help="their seeds (training uses 1,000,000-8,000,799)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work", default="", help="keep the generated weeks, dataset and scores here")
    ap.add_argument("--check-share", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0, help="seed of the fit/check split (as training.calibrate)")
    ap.add_argument("--l2", type=float, default=1e-3)
    ap.add_argument("--mlp-epochs", type=int, default=150)
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    from tokenizers import Tokenizer

    from training.batches import load_split

    if not args.scores:
        work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="overchoice-"))
        args.scores, args.data, args.rollouts = score_afresh(args, work)
    elif not args.data or not args.rollouts:
        raise SystemExit("--scores needs --data and --rollouts")
    with np.load(args.scores) as z:
        logits, targets, weeks, n_weeks = z["logits"].astype(np.float64), z["targets"], z["weeks"], int(z["n_weeks"])
    tok = Tokenizer.from_file(str(Path(args.data) / "tokenizer.json"))
    first = {t: i for i, t in enumerate(action_token_ids(tok))}
    y = np.array([first[int(t)] for t in targets])
    seeds: list[int] = []
    for name in ("train", "val"):
        split = load_split(args.data, name)
        if split is not None:
            seeds += [int(s) for s in split["seeds"]]
    if len(seeds) != n_weeks:
        raise SystemExit(f"{args.data} holds {len(seeds)} weeks, the scores {n_weeks}: not the same dataset")
    episodes: dict[int, dict[str, Any]] = {}
    for path in args.rollouts:
        with open(path) as f:
            for line in f:
                ep = json.loads(line)
                episodes[int(ep["seed"])] = ep
    steps = decision_steps(weeks, seeds, episodes)
    known = steps >= 0
    check = check_split(n_weeks, args.check_share, args.seed)[weeks]
    fit = ~check
    greedy = logits.argmax(axis=1)
    report: dict[str, Any] = {"scores": args.scores, "decisions": int(len(y)), "check": int(check.sum()),
                              "mapped": int(known.sum())}

    j = judge(logits[check], y[check], np.zeros(len(ACTIONS)), ACTIONS)
    teacher = dict(zip(ACTIONS, np.bincount(y[check], minlength=len(ACTIONS)).tolist(), strict=True))
    report["greedy_vs_sampled"] = {"teacher": teacher, "greedy": {"agreement": j["agreement"], "counts": j["counts"]},
                                   "sampled": j["sampled"]}
    print(f"{int(check.sum())} check decisions ({report['mapped']} of {len(y)} mapped to a slot)\n")
    print(f"1. greedy agreement {j['agreement']:.3f}, sampled {j['sampled']['agreement']:.3f}")
    print("   " + "  ".join(f"{a}: teacher {teacher[a]} greedy {j['counts'][a]} sampled {j['sampled']['counts'][a]:.0f}"
                           for a in ACTIONS if teacher[a] or j["counts"][a]))
    oc = over_chosen(greedy[check], y[check])
    report["over_chosen"] = oc
    print("2. over-chosen (only model / only teacher): " + ", ".join(f"{a} {m}/{t}" for a, (m, t) in oc.items()))

    report["offsets"] = {}
    print("3. offsets fitted on the other weeks, judged on the check weeks (won / lost):")
    kz, ky, kfit, kchk = logits[known], y[known], fit[known], check[known]
    for name, groups in (("all", np.zeros(len(ky), np.int64)), ("slot of the day", steps[known] % spec.SLOTS_PER_DAY),
                         ("slot of the week", steps[known])):
        new = (kz + group_offsets(kz, ky, groups, kfit, args.l2)).argmax(axis=1)
        won, lost = won_lost(kz.argmax(axis=1)[kchk], new[kchk], ky[kchk])
        agree = float((new[kchk] == ky[kchk]).mean())
        report["offsets"][name] = {"won": won, "lost": lost, "agreement": agree}
        print(f"   {name}: {won} won, {lost} lost, agreement {agree:.3f}")

    learn, med = ACTIONS.index("LEARN"), ACTIONS.index("MEDITATE")
    rows = []
    print("4. afternoons by day (all scored weeks): teacher LEARN / model LEARN, teacher MEDITATE / model MEDITATE,"
          " model LEARN where the teacher says MEDITATE")
    for d in range(spec.EPISODE_STEPS // spec.SLOTS_PER_DAY):
        m = steps == d * spec.SLOTS_PER_DAY + spec.SLOTS.index("afternoon")
        row = {"day": d, "decisions": int(m.sum()), "teacher_learn": int((y[m] == learn).sum()),
               "model_learn": int((greedy[m] == learn).sum()), "teacher_meditate": int((y[m] == med).sum()),
               "model_meditate": int((greedy[m] == med).sum()),
               "learn_for_meditate": int(((greedy[m] == learn) & (y[m] == med)).sum())}
        rows.append(row)
        print(f"   day {d}: {row['decisions']} decisions, LEARN {row['teacher_learn']} / {row['model_learn']}, "
              f"MEDITATE {row['teacher_meditate']} / {row['model_meditate']}, LEARN for MEDITATE {row['learn_for_meditate']}")
    report["afternoons"] = rows

    # the classifier reads the product-shaped records (views and filters): stream weeks
    shaped = np.array([k and {"views", "filters"} <= set(episodes[int(seeds[w])]) for w, k in zip(weeks, known, strict=True)])
    if args.mlp_epochs > 0 and shaped.any():
        m = shaped
        x = np.array([features(episodes[int(seeds[w])], int(t)) for w, t in zip(weeks[m], steps[m], strict=True)])
        pick = mlp(x, y[m], fit[m], args.mlp_epochs)
        c = check[m]
        agree = float((pick[c] == y[m][c]).mean())
        model_agree = float((greedy[m][c] == y[m][c]).mean())
        counts = dict(zip(ACTIONS, np.bincount(pick[c], minlength=len(ACTIONS)).tolist(), strict=True))
        report["classifier"] = {"decisions": int(m.sum()), "agreement": agree, "model_agreement": model_agree, "counts": counts,
                                "over_chosen": over_chosen(pick[c], y[m][c])}
        print(f"5. a plain classifier on the prompt's numbers: agreement {agree:.3f} (the model {model_agree:.3f}); "
              "over-chosen " + ", ".join(f"{a} {mm}/{t}" for a, (mm, t) in report["classifier"]["over_chosen"].items()))

    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
