"""Feedback mode (issue 20): belief_mae after k answers, acceptance, and the issue's goals.

    nice .venv/bin/python benchmarks/feedback.py                       # 50 episodes a condition
    nice .venv/bin/python benchmarks/feedback.py --episodes 4 --no-student --out /tmp/fb

For each observation condition (clean, noisy, answers-only; in-dist seeds 0..N-1, feedback
on) it plays the Bayesian agent once and reads, on the very same weeks, the ideal
posterior's belief (:class:`agent.lab.ideal.IdealPosterior`, 20,000 in-dist prior profiles; in
the clean and noisy conditions its weight collapses on a few particles, see its ESS); then
the structureless reference and the student (``--student``; default the bundled product
student, the one that reads a person's answers on real days; their own weeks, same seeds). Also:
discrete-3 people in answers-only (is the right archetype the most probable of the three
after 8 answers?), the asking-to-learn ablation, and feedback off / clean in-dist (100 weeks).

Writes ``feedback_curves.png``, ``results_feedback.md`` and ``results_feedback.json`` into
``--out`` (default docs/). Progress goes to stderr.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402

from agent.answers import answer_log_likelihood, track_states  # noqa: E402
from agent.lab.ideal import IdealPosterior  # noqa: E402
from agent.teacher import BayesAgent  # noqa: E402
from simulator import spec  # noqa: E402
from simulator.dynamics import compact_params  # noqa: E402
from simulator.evaluate import episode_plan, evaluate  # noqa: E402
from simulator.feedback_eval import answers_to_target, play_episodes  # noqa: E402
from simulator.profiles import belief_truth_array, named_profile  # noqa: E402
from simulator.structureless import StructurelessPolicy  # noqa: E402

CONDITIONS = ("clean", "noisy", "answers-only")
KEYS = (2, 4, 8, 16, 28)
#: The Bayesian agent's settings (its defaults: accept_weight 0.006, ask_weight 3 in the
#: noisy and answers-only conditions).
AGENT: dict[str, Any] = {}
#: The asking-to-learn ablation: the other setting, per condition.
ASK_ABLATION = {"answers-only": {"ask_weight": 0.0}, "noisy": {"ask_weight": 0.0}}
ARCHETYPES = list(spec.NAMED_PROFILES)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def progress(label: str):
    t0 = time.time()

    def report(i: int, n: int) -> None:
        if i == n or i % 5 == 0:
            log(f"  {label}: {i}/{n} episodes, {time.time() - t0:.0f}s")

    return report


class WithObservers:
    """Plays ``agent`` and feeds the same observations to side posteriors (the ideal one,
    the three archetypes), recording their beliefs / weights after k answers."""

    def __init__(self, agent: Any, observers: dict[str, IdealPosterior]):
        self.agent = agent
        self.observers = observers
        self.records: dict[str, list[list[np.ndarray]]] = {k: [] for k in observers}
        self.agent_states: list[Any] = []
        self.ess_end: list[float] = []

    def configure(self, feedback: bool = False, observe: str = "clean") -> None:
        self.agent.configure(feedback=feedback, observe=observe)
        for o in self.observers.values():
            o.observe = observe

    def reset(self, seed: int) -> None:
        self.agent.reset(seed)
        for k, o in self.observers.items():
            o.reset(seed)
            self.records[k].append([])

    def _feed(self, obs: dict[str, Any]) -> None:
        for k, o in self.observers.items():
            o.update(obs)
            rec = o.belief() if k == "ideal" else o.weights.reshape(len(ARCHETYPES), -1).sum(axis=1)
            self.records[k][-1].append(rec)

    def act(self, obs: dict[str, Any]):
        self._feed(obs)
        return self.agent.act(obs)

    def final_belief(self, obs: dict[str, Any]):
        self._feed(obs)
        if "ideal" in self.observers:
            self.ess_end.append(self.observers["ideal"].ess)
        b = self.agent.final_belief(obs)
        bs = self.agent.belief_state
        self.agent_states.append((list(bs._track), list(bs._answers)))
        return b


def curve(mae: np.ndarray) -> list[float]:
    return [float(x) for x in np.nanmean(mae, axis=0)]


def summary(g: dict[str, np.ndarray], feedback: bool = True) -> dict[str, Any]:
    acc = g["accepted"]
    return {
        "episodes": int(len(g["final_score"])),
        "final_score": float(g["final_score"].mean()),
        "final_score_ci95": float(1.96 * g["final_score"].std(ddof=1) / np.sqrt(len(g["final_score"]))),
        "belief_mae_end": float(np.nanmean(g["mae_curve"][:, 28])),
        "acceptance_rate": float(np.nanmean(acc)) if feedback else None,
        "acceptance_1_2": float(np.nanmean(acc[:, :8])) if feedback else None,
        "acceptance_6_7": float(np.nanmean(acc[:, 20:])) if feedback else None,
        "belief_mae_curve": curve(g["mae_curve"]),
        "answers_to_mae_015": float(answers_to_target(g["mae_curve"]).mean()),
    }


def ideal_summary(wrapper: WithObservers, truth: np.ndarray) -> dict[str, Any]:
    beliefs = np.array(wrapper.records["ideal"])  # (N, 29, 3)
    mae = np.abs(beliefs - truth[:, None, :]).mean(axis=2)
    return {
        "belief_mae_curve": curve(mae),
        "belief_mae_end": float(mae[:, 28].mean()),
        "answers_to_mae_015": float(answers_to_target(mae).mean()),
        "ess_end": float(np.mean(wrapper.ess_end)),
    }


def run_condition(observe: str, n: int, student_path: Path | None) -> dict[str, Any]:
    seeds = list(range(n))
    out: dict[str, Any] = {}
    log(f"[{observe}] bayes + ideal posterior")
    wrapper = WithObservers(BayesAgent(**AGENT), {"ideal": IdealPosterior(observe)})
    g = play_episodes(wrapper, seeds, feedback=True, observe=observe, progress=progress("bayes"))
    out["bayes"] = summary(g)
    out["ideal"] = ideal_summary(wrapper, g["truth"])
    log(f"[{observe}] structureless reference")
    out["structureless"] = summary(play_episodes(StructurelessPolicy(), seeds, feedback=True, observe=observe))
    if student_path is not None:
        out["student"] = run_student(observe, n, student_path)
    return out


def run_student(observe: str, n: int, student_path: Path) -> dict[str, Any]:
    """The student's weeks in feedback mode (seeds 0..n-1), as ``rhythm sim eval`` plays it."""
    from agent.lab.student_policy import StudentPolicy

    log(f"[{observe}] student {student_path.name}")
    pol = StudentPolicy.from_gguf(student_path)
    out = summary(play_episodes(pol, range(n), feedback=True, observe=observe, progress=progress("student")))
    out["invalid_outputs"] = pol.llm.invalid_outputs
    return out


def run_ask_ablation(observe: str, n: int) -> dict[str, Any]:
    seeds = list(range(n))
    kwargs = ASK_ABLATION[observe]
    log(f"[{observe}] asking to learn ablation: {kwargs}")
    g = play_episodes(
        BayesAgent(**{**AGENT, **kwargs}), seeds, feedback=True, observe=observe,
        progress=progress("ablation"),
    )
    return summary(g)


def run_discrete(per_profile: int) -> dict[str, Any]:
    """Discrete-3 people, answers-only: which of the three archetypes is most probable after k
    answers, three ways: the exact posterior over the three (2,000 simulated weeks each), the
    agent's own likelihood (its track of each archetype's week), and the archetype nearest
    to the agent's continuous belief."""
    seeds, profiles, cond = episode_plan("discrete", per_profile)
    arch = np.stack([named_profile(a).to_array() for a in ARCHETYPES])
    reps = 2000
    exact = IdealPosterior("answers-only", params=np.repeat(arch, reps, axis=0))
    wrapper = WithObservers(BayesAgent(**AGENT), {"three": exact})
    log("[discrete-3, answers-only] bayes + the three-archetype posterior")
    g = play_episodes(
        wrapper, seeds, cond, profiles, feedback=True, observe="answers-only",
        progress=progress("discrete"),
    )
    right = np.array([ARCHETYPES.index(p) for p in profiles])
    arch_truth = belief_truth_array(arch)
    compact = compact_params(arch)
    ks = range(0, 29)
    share_exact, share_agent, share_near = [], [], []
    for i in range(len(seeds)):
        w = np.array(wrapper.records["three"][i])  # (29, 3)
        track, answers = wrapper.agent_states[i]
        states, _ = track_states(compact, track, len(track) - 1, 0.0)
        ll = np.zeros((29, 3))
        for k, ans in enumerate(answers[:28]):
            ll[k + 1] = ll[k] + answer_log_likelihood(compact, states[ans.step], ans.slot, ans.action, ans.accepted)
        near = np.abs(g["beliefs"][i][:, None, :] - arch_truth[None]).sum(axis=2)
        share_exact.append([np.argmax(w[k]) == right[i] for k in ks])
        share_agent.append([np.argmax(ll[k]) == right[i] and k > 0 for k in ks])
        share_near.append([np.argmin(near[k]) == right[i] for k in ks])
    res = {
        "episodes": len(seeds),
        "exact_three_way": np.mean(share_exact, axis=0).tolist(),
        "agent_likelihood_three_way": np.mean(share_agent, axis=0).tolist(),
        "nearest_to_agent_belief": np.mean(share_near, axis=0).tolist(),
        "final_score": float(g["final_score"].mean()),
        "belief_mae_curve": curve(g["mae_curve"]),
    }
    return res


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {
        "bayes": ("C0", "-", "Bayesian agent"),
        "ideal": ("k", "--", "ideal posterior (20,000 prior profiles)"),
        "structureless": ("C3", ":", "structureless reference"),
        "student": ("C2", "-.", "student (Q8_0)"),
    }
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    for ax, observe in zip(axes, CONDITIONS, strict=True):
        res = results["conditions"].get(observe, {})
        for name, (color, ls, label) in styles.items():
            if name in res:
                ax.plot(range(29), res[name]["belief_mae_curve"], color=color, ls=ls, label=label)
        ax.axhline(0.15, color="grey", lw=0.6)
        title = f"{observe} (feedback on)"
        if "ideal" in res and observe != "answers-only":
            title += f"; ideal's ESS {res['ideal']['ess_end']:.0f} of 20,000"
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("answers")
        ax.set_xticks([0, 2, 4, 8, 16, 28])
    axes[0].set_ylabel("belief_mae (mean over episodes)")
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    axes[0].legend(list(seen.values()), list(seen), fontsize=7)
    fig.suptitle(f"belief_mae after k answers, in-dist, {results['episodes']} weeks per condition")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _f(x, d: int = 3) -> str:
    return "-" if x is None else f"{x:.{d}f}"


def markdown(results: dict[str, Any]) -> str:
    n = results["episodes"]
    lines = [
        "# Feedback mode: learning the person from answers (issue 20)",
        "",
        f"`nice python benchmarks/feedback.py` ({n} in-dist weeks per condition, seeds 0-{n - 1},"
        " feedback on; the agent: `BayesAgent()`: accept_weight 0.006, ask_weight 3 under noisy and answers-only).",
        "belief_mae after k answers is the belief the policy holds when it has read k answers;",
        "the ideal posterior reads the Bayesian agent's weeks (same recommendations, same answers).",
        "",
        "![belief_mae after k answers](feedback_curves.png)",
        "",
        *([f"The student is `{results['student_model']}`.", ""] if "student_model" in results else []),
        "| observe | policy | final_score | acceptance | days 1-2 | days 6-7 | mae 0 | mae 2 | mae 4 | mae 8 | mae 16 | mae 28 | answers to 0.15 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for observe, res in results["conditions"].items():
        for name in ("bayes", "ideal", "structureless", "student"):
            if name not in res:
                continue
            r = res[name]
            c = r["belief_mae_curve"]
            score = f"{r['final_score']:.3f} ± {r['final_score_ci95']:.3f}" if "final_score" in r else "-"
            lines.append(
                f"| {observe} | {name} | {score} | {_f(r.get('acceptance_rate'), 2)} | "
                f"{_f(r.get('acceptance_1_2'), 2)} | {_f(r.get('acceptance_6_7'), 2)} | "
                + " | ".join(_f(c[k]) for k in (0, *KEYS))
                + f" | {r['answers_to_mae_015']:.1f} |"
            )
    if "ideal_ess" in results:
        lines += ["", "Ideal posterior: effective sample size at the end of the week (of 20,000): "
                  + ", ".join(f"{k} {v:.0f}" for k, v in results["ideal_ess"].items()) + ". "
                  "Where meters are read (clean, noisy) its weight collapses onto a few of the "
                  "20,000 prior draws: the meters pin the person far more tightly than 20,000 "
                  "draws can represent, so there it is no limit (the Bayesian agent does better); "
                  "it is the reference for answers only, where nothing else is measured."]
    if "ask" in results:
        lines += ["", "## Asking to learn", "",
                  "The same seeds with and without the value of what an answer would teach "
                  "(`ask_weight` 3) in the plan score:", "",
                  "| observe | agent | final_score | mae 4 | mae 8 | mae 16 | mae 28 | acceptance 6-7 |",
                  "|---|---|---|---|---|---|---|---|"]
        for observe, by in results["ask"].items():
            for ask in ("does not ask", "asks"):
                r = by[ask]
                c = r["belief_mae_curve"]
                lines.append(f"| {observe} | {ask} | {r['final_score']:.3f} | " + " | ".join(_f(c[k]) for k in (4, 8, 16, 28)) + f" | {_f(r['acceptance_6_7'], 2)} |")
    if "discrete" in results:
        d = results["discrete"]
        lines += ["", "## Discrete-3 people, answers only", "",
                  f"{d['episodes']} weeks (each archetype, seeds 0-{d['episodes'] // 3 - 1}); share of weeks where the right archetype is the most probable of the three after k answers:", "",
                  "| after k answers | 2 | 4 | 8 | 16 | 28 |", "|---|---|---|---|---|---|"]
        for key, label in (("exact_three_way", "exact posterior over the three"),
                           ("agent_likelihood_three_way", "the agent's likelihood, three hypotheses"),
                           ("nearest_to_agent_belief", "archetype nearest the agent's belief")):
            lines.append(f"| {label} | " + " | ".join(f"{d[key][k]:.2f}" for k in KEYS) + " |")
    if "feedback_off" in results:
        r = results["feedback_off"]
        lines += ["", f"Feedback off, clean, in-dist ({r['episodes']} weeks): bayes final_score "
                  f"{r['final_score']:.3f} (belief_mae {r['belief_mae']:.3f})"
                  + (f"; student {results['student_feedback_off']['final_score']:.3f} (belief_mae "
                     f"{results['student_feedback_off']['belief_mae']:.3f})" if "student_feedback_off" in results else "")
                  + "."]
    if "goals" in results:
        lines += ["", "## Goals of issue 20", "", "| goal | target | measured | met |", "|---|---|---|---|"]
        for g in results["goals"]:
            lines.append(f"| {g['goal']} | {g['target']} | {g['measured']} | {'yes' if g['met'] else 'no'} |")
    return "\n".join(lines) + "\n"


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    c = results["conditions"]
    if "answers-only" in c:
        b, i, s = (c["answers-only"][k]["belief_mae_curve"] for k in ("bayes", "ideal", "structureless"))
        for k in (8, 28):
            out.append({"goal": f"answers-only: bayes at most 0.01 above the ideal after {k} answers",
                        "target": "<= 0.01", "measured": f"{b[k]:.3f} vs {i[k]:.3f} ({b[k] - i[k]:+.3f})",
                        "met": b[k] - i[k] <= 0.01})
        out.append({"goal": "answers-only: structureless at least 0.02 worse at 28", "target": ">= 0.02",
                    "measured": f"{s[28]:.3f} vs {b[28]:.3f} ({s[28] - b[28]:+.3f})", "met": s[28] - b[28] >= 0.02})
    if "discrete" in results:
        v = results["discrete"]["agent_likelihood_three_way"][8]
        out.append({"goal": "discrete-3, answers-only: right archetype most probable after 8 answers",
                    "target": "most episodes", "measured": f"{v:.2f} (agent's likelihood)", "met": v > 0.5})
    if "noisy" in c:
        r = c["noisy"]["bayes"]
        out.append({"goal": "noisy + answers: bayes final_score", "target": ">= 0.75", "measured": f"{r['final_score']:.3f}", "met": r["final_score"] >= 0.75})
        out.append({"goal": "noisy + answers: belief_mae at the end", "target": "<= 0.10", "measured": f"{r['belief_mae_end']:.3f}", "met": r["belief_mae_end"] <= 0.10})
        out.append({"goal": "noisy + answers: acceptance days 6-7", "target": ">= 0.70", "measured": f"{r['acceptance_6_7']:.3f}", "met": r["acceptance_6_7"] >= 0.70})
        if "student" in c["noisy"]:
            st = c["noisy"]["student"]["final_score"]
            out.append({"goal": "noisy + answers: student within 0.05 of bayes", "target": ">= bayes - 0.05",
                        "measured": f"{st:.3f} vs {r['final_score']:.3f}", "met": st >= r["final_score"] - 0.05})
    if "feedback_off" in results:
        v = results["feedback_off"]["final_score"]
        out.append({"goal": "clean, feedback off: bayes in-dist", "target": ">= 0.84", "measured": f"{v:.3f}", "met": v >= 0.84})
    if "student_feedback_off" in results:
        v = results["student_feedback_off"]["final_score"]
        out.append({"goal": "clean, feedback off: student in-dist", "target": ">= 0.791", "measured": f"{v:.3f}", "met": v >= 0.791 - 1e-9})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--no-student", action="store_true")
    ap.add_argument(
        "--student", default="",
        help="the student GGUF (default: the bundled product student, student-real-q8_0.gguf: the one "
        "that reads a person's answers on real days)",
    )
    ap.add_argument(
        "--student-only", action="store_true",
        help="with --update: rerun only the student's rows (each condition and feedback off), keep the rest",
    )
    ap.add_argument("--no-ask", action="store_true", help="skip the asking-to-learn ablation")
    ap.add_argument("--discrete", type=int, default=17, help="weeks per archetype (0: skip)")
    ap.add_argument("--feedback-off", type=int, default=100, help="clean in-dist weeks (0: skip)")
    ap.add_argument("--out", default=str(_HERE.parent / "docs"))
    ap.add_argument("--from-json", action="store_true", help="only re-render the table and plot")
    ap.add_argument(
        "--update", action="store_true",
        help="start from the existing results JSON: rerun only what is asked, keep the rest",
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        results = json.loads((out / "results_feedback.json").read_text())
        results["goals"] = goals(results)
        (out / "results_feedback.md").write_text(markdown(results))
        plot(results, out / "feedback_curves.png")
        return
    student = None
    if not args.no_student:
        p = Path(args.student) if args.student else _HERE.parent / "rhythm" / "models" / "student-real-q8_0.gguf"
        student = p if p.is_file() else None
    if args.student_only and (not args.update or student is None):
        ap.error("--student-only needs --update and a student")
    results: dict[str, Any] = {"episodes": args.episodes, "agent": AGENT, "conditions": {}}
    if args.update:
        results = json.loads((out / "results_feedback.json").read_text())
    if student is not None:
        results["student_model"] = student.name
    if args.student_only:
        for observe in args.conditions.split(","):
            results["conditions"][observe]["student"] = run_student(observe, args.episodes, student)
            json.dump(results, (out / "results_feedback.json").open("w"), indent=1)
        args.no_ask, args.discrete, args.conditions = True, 0, ""
    for observe in filter(None, args.conditions.split(",")):
        results["conditions"][observe] = run_condition(observe, args.episodes, student)
        json.dump(results, (out / "results_feedback.json").open("w"), indent=1)
    results["ideal_ess"] = {k: v["ideal"]["ess_end"] for k, v in results["conditions"].items()}
    if not args.no_ask:
        results.setdefault("ask", {})
        for observe in ("answers-only", "noisy"):
            if observe not in args.conditions.split(","):
                continue
            asks = observe in BayesAgent().ask_conditions
            base, other = ("asks", "does not ask") if asks else ("does not ask", "asks")
            results["ask"][observe] = {
                base: results["conditions"][observe]["bayes"],
                other: run_ask_ablation(observe, args.episodes),
            }
            json.dump(results, (out / "results_feedback.json").open("w"), indent=1)
    if args.discrete:
        results["discrete"] = run_discrete(args.discrete)
    if args.feedback_off:
        if not args.student_only:
            log("[clean, feedback off] bayes, in-dist")
            r = evaluate(BayesAgent(), "in-dist", episodes=args.feedback_off, progress=progress("bayes"))
            results["feedback_off"] = {"episodes": r.episodes, "final_score": r.final_score, "belief_mae": r.belief_mae}
        if student is not None:
            from agent.lab.student_policy import StudentPolicy

            log("[clean, feedback off] student, in-dist")
            g = play_episodes(
                StudentPolicy.from_gguf(student), range(args.feedback_off), feedback=False,
                observe="clean", progress=progress("student"),
            )
            results["student_feedback_off"] = {
                "episodes": len(g["final_score"]),
                "final_score": float(g["final_score"].mean()),
                "belief_mae": float(np.nanmean(g["belief_mae"])),
            }
    results["goals"] = goals(results)
    json.dump(results, (out / "results_feedback.json").open("w"), indent=1)
    (out / "results_feedback.md").write_text(markdown(results))
    plot(results, out / "feedback_curves.png")
    log(f"wrote {out / 'results_feedback.md'}, {out / 'feedback_curves.png'}")


if __name__ == "__main__":
    main()
