"""Weeks with a calendar: what planning around the fixed slots is worth (issue 19 item 9).

    .venv/bin/python benchmarks/calendar_weeks.py                        # 100 episodes, markdown table
    .venv/bin/python benchmarks/calendar_weeks.py --episodes 30 --student-episodes 10
    .venv/bin/python benchmarks/calendar_weeks.py --no-student --json
    .venv/bin/python benchmarks/calendar_weeks.py --results-md docs/results.md   # (re)writes its section there

Every policy plays the same in-dist seeds 0..N-1 in calendar weeks
(:class:`simulator.calendar.CalendarWeek`: a share of the week's slots is fixed by
commitments drawn per episode; in a fixed slot the person does the commitment whatever is
recommended; the observation carries the week's calendar). Rows: the spec 9 heuristic,
``bayes`` (plans every slot as if free; the world overrides it), ``bayes-calendar`` (the
fixed slots forced in its plan), and the bundled student without and with the calendar as
``cal`` lines in its prompt (where llama-cpp-python is installed). Paired differences on the
same seeds give the value of the calendar knowledge with its 95% interval. Progress goes to
stderr; the table (markdown, or ``--json``) to stdout; with ``--results-md`` the section
"Weeks with a calendar" of that file is replaced (or appended) by the generated one, the
rest of the file kept (``training/evaluate.py`` rewrites docs/results.md whole: rerun this
after it).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

from simulator import spec  # noqa: E402
from simulator.calendar import NO_ACTION, draw_calendar  # noqa: E402

#: (row name, registered policy or student variant, knows the calendar)
ROWS = (
    ("heuristic", "heuristic", "no"),
    ("bayes", "bayes", "no: plans every slot as free"),
    ("bayes-calendar", "bayes-calendar", "yes: fixed slots forced in its plan"),
    ("student", "student", "no"),
    ("student + cal lines", "student+cal", "shown as v1 `cal` lines (never trained on them)"),
)
#: Paired differences reported: (better informed, baseline).
PAIRS = (("bayes-calendar", "bayes"), ("student + cal lines", "student"))


def _policy(kind: str):
    if not kind.startswith("student"):
        return kind
    from agent.lab.student_policy import StudentPolicy, simulator_student_path

    return StudentPolicy.from_gguf(simulator_student_path(), read_calendar=kind == "student+cal")


def student_available() -> str | None:
    """None if the bundled student can run here, else why not."""
    from importlib.util import find_spec

    if find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed"
    from agent.lab.student_policy import simulator_student_path

    return None if simulator_student_path() is not None else "no bundled student model"


def summary(g: dict[str, np.ndarray]) -> dict[str, float | int | None]:
    s = g["final_score"]
    mae = g["belief_mae"]
    return {
        "episodes": len(s),
        "final_score": float(s.mean()),
        "half": float(1.96 * s.std(ddof=1) / np.sqrt(len(s))) if len(s) > 1 else 0.0,
        "belief_mae": float(np.nanmean(mae)) if np.isfinite(mae).any() else None,
        "crashes": float(g["crashes"].mean()),
        "overridden": float(g["overridden"].mean()),
    }


def paired(a: np.ndarray, b: np.ndarray) -> dict[str, float | int]:
    """Mean of a - b over the episodes both played (the first min(len) seeds), its 95%
    half-interval and the share of episodes where a >= b."""
    n = min(len(a), len(b))
    d = a[:n] - b[:n]
    half = float(1.96 * d.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    return {"episodes": n, "mean": float(d.mean()), "half": half, "share_ge": float((d >= 0).mean())}


def run(episodes: int, student_episodes: int, with_student: bool, console: Console) -> dict:
    from agent.lab.policies import register_agent_policies
    from simulator.evaluate import rollout

    register_agent_policies()
    rows = [r for r in ROWS if with_student or not r[1].startswith("student")]
    grades: dict[str, dict[str, np.ndarray]] = {}
    seconds: dict[str, float] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as bar:
        for name, kind, _ in rows:
            n = student_episodes if kind.startswith("student") else episodes
            task = bar.add_task(name, total=n)
            t0 = time.perf_counter()
            grades[name] = rollout(
                _policy(kind),
                "in-dist",
                episodes=n,
                calendar=True,
                progress=lambda i, _n, task=task: bar.update(task, completed=i),
            )
            seconds[name] = time.perf_counter() - t0
    cals = np.array([draw_calendar(s) for s in range(episodes)])
    fixed = cals != NO_ACTION
    return {
        "episodes": episodes,
        "student_episodes": student_episodes if with_student else 0,
        "fixed_slots_per_week": float(fixed.sum(axis=1).mean()),
        "fixed_share_by_slot": {
            spec.SLOTS[s]: float(fixed[:, s :: spec.SLOTS_PER_DAY].mean()) for s in range(spec.SLOTS_PER_DAY)
        },
        "rows": {
            name: {"knows_calendar": knows, **summary(grades[name]), "seconds": seconds[name]}
            for name, _, knows in rows
        },
        "paired": {
            f"{a} - {b}": paired(grades[a]["final_score"], grades[b]["final_score"])
            for a, b in PAIRS
            if a in grades and b in grades
        },
    }


def render(res: dict) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=_HERE.parent
    ).stdout.strip()
    share = ", ".join(f"{k} {v:.0%}" for k, v in res["fixed_share_by_slot"].items())
    lines = [
        f"In-dist seeds 0-{res['episodes'] - 1} in calendar weeks (commit {commit or 'unknown'}): "
        f"{res['fixed_slots_per_week']:.1f} fixed slots a week on average ({share}). "
        "final_score ± 95% half-interval; crashes per week; overridden = recommendations per "
        "week a commitment replaced.",
        "",
        "| policy | knows the calendar | episodes | final_score | belief_mae | crashes | overridden |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in res["rows"].items():
        mae = "-" if r["belief_mae"] is None else f"{r['belief_mae']:.3f}"
        lines.append(
            f"| {name} | {r['knows_calendar']} | {r['episodes']} | {r['final_score']:.3f} ± {r['half']:.3f} "
            f"| {mae} | {r['crashes']:.2f} | {r['overridden']:.2f} |"
        )
    if res["paired"]:
        lines += ["", "| paired difference (same seeds) | episodes | final_score | episodes not worse |", "|---|---|---|---|"]
        for k, p in res["paired"].items():
            lines.append(f"| {k} | {p['episodes']} | {p['mean']:+.3f} ± {p['half']:.3f} | {p['share_ge']:.0%} |")
    return "\n".join(lines)


SECTION = "## Weeks with a calendar"


def section(res: dict, argv: list[str]) -> str:
    """The generated docs section: heading, the command that made it, the tables."""
    cmd = " ".join(["python benchmarks/calendar_weeks.py", *argv])
    return "\n".join(
        [
            SECTION,
            "",
            f"_Generated by `{cmd}` on {datetime.date.today().isoformat()} (do not edit by hand; "
            "docs/simulator.md \"Calendar weeks\" and docs/agent.md \"Planning around a calendar\" "
            "explain the mode and the agent)._",
            "",
            render(res),
            "",
            "The same policies in plain weeks: the table at the top of this file. The shipped "
            "student reads format v1 and was trained on plain weeks only: its `cal` lines are a "
            "measurement of how it copes, not a trained skill.",
            "",
        ]
    )


def write_section(path: Path, text: str) -> None:
    """Replace the ``SECTION`` of the markdown file at ``path`` (up to the next ``## ``
    heading) with ``text``, or append it; the rest of the file is kept."""
    old = path.read_text() if path.exists() else ""
    lines = old.splitlines()
    if SECTION in lines:
        i = lines.index(SECTION)
        j = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
        head, tail = lines[:i], lines[j:]
    else:
        head, tail = lines, []
    out = "\n".join(head).rstrip("\n")
    out = (out + "\n\n" if out else "") + text.rstrip("\n") + "\n"
    if tail:
        out += "\n" + "\n".join(tail) + "\n"
    path.write_text(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=100, help="episodes per policy (seeds 0..N-1)")
    ap.add_argument("--student-episodes", type=int, default=None, help="episodes for the student rows (default: --episodes)")
    ap.add_argument("--no-student", action="store_true", help="leave the student rows out")
    ap.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    ap.add_argument("--results-md", type=Path, default=None, help="(re)write the section 'Weeks with a calendar' of this markdown file")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    if args.episodes < 2 or (args.student_episodes is not None and args.student_episodes < 2):
        ap.error("episodes must be at least 2")
    console = Console(stderr=True)
    why = None if args.no_student else student_available()
    if why is not None:
        console.print(f"student rows left out: {why}")
    with_student = not args.no_student and why is None
    n_student = args.episodes if args.student_episodes is None else args.student_episodes
    res = run(args.episodes, n_student, with_student, console)
    print(json.dumps(res, indent=2) if args.json else render(res))
    if args.results_md is not None:
        write_section(args.results_md, section(res, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
