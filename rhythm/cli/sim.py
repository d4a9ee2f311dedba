"""`rhythm sim`: evaluate policies on the simulator (thin: parse, call simulator.evaluate, render)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:  # the simulator loads only when a command runs (a fast `rhythm --help`)
    from simulator.evaluate import EvalResult
    from simulator.feedback_eval import FeedbackEvalResult

app = typer.Typer(
    help="Simulator: evaluate policies on the hidden-person week.", no_args_is_help=True
)
console = Console()

_CONDITION_TITLES = {"in-dist": "in-dist", "ood": "OOD", "discrete": "discrete-3"}
ALL_WORLDS = "all-worlds"
NOMINAL = "nominal"  # simulator.worlds.NOMINAL (the --world default, without loading the simulator)


@app.callback()
def sim() -> None:
    """Simulator: evaluate policies on the hidden-person week."""
    register_app_policies()


def register_app_policies() -> None:
    """The app shell plugs the agents of agent/ into the simulator's registry by name."""
    from agent.lab.policies import register_agent_policies

    register_agent_policies()


@app.command("policies")
def policies_cmd() -> None:
    """List the policy names, grouped: baselines, teachers, the day planner, references and
    students."""
    from agent.lab.policies import policy_groups

    for group, names in policy_groups().items():
        console.print(f"{group}:", highlight=False)
        for name in names:
            console.print(f"  {name}", highlight=False)


@app.command("eval")
def eval_cmd(
    policy: str = typer.Option(
        ..., "--policy", help="Registered policy name (see `rhythm sim policies`)."
    ),
    condition: str = typer.Option("in-dist", "--condition", help="in-dist, ood, discrete or all."),
    episodes: int | None = typer.Option(
        None,
        "--episodes",
        min=1,
        help="Episodes (per named profile for discrete); default 100 / 50 / 5.",
    ),
    seed_offset: int = typer.Option(
        0, "--seed-offset", min=0, help="Shift every protocol seed by this."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    feedback: bool = typer.Option(
        False, "--feedback", help="Feedback mode: the person answers each recommendation."
    ),
    observe: str = typer.Option(
        "clean", "--observe", help="Observation condition: clean, noisy or answers-only."
    ),
    world: str = typer.Option(
        NOMINAL,
        "--world",
        help="A misspecified world (nominal, effects, timing, noise, kind, drift, hidden, "
        "all, or departures joined with +), or all-worlds for the per-world table.",
    ),
    calendar: bool = typer.Option(
        False,
        "--calendar",
        help="Calendar weeks: some slots fixed by commitments the person keeps whatever is "
        "recommended (bayes-calendar plans around them; bayes does not).",
    ),
    read_calendar: bool = typer.Option(
        False, "--read-calendar", help="With --calendar: show the student the fixed slots as cal lines."
    ),
    ray: str | None = typer.Option(
        None,
        "--ray",
        metavar="ADDRESS",
        help="Play the episodes as units on a Ray cluster: its address, auto (the cluster this "
        "machine joined with `ray start`) or local (a private runtime here); same figures. "
        "Needs pip install 'rhythm\\[cluster]'.",
    ),
    workers: int = typer.Option(
        1, "--workers", min=1, help="Play the episodes as units in this many local processes."
    ),
) -> None:
    """Evaluate a policy: final_score mean with 95% interval, grader components, belief_mae, crashes.

    With --feedback (or another --observe), also acceptance, the belief_mae after k answers
    and the structureless reference's. `--policy student` is the bundled simulator student
    (format v1), `student-real` the bundled product-shaped one (v4), `student:PATH.gguf`
    another one (llama-cpp-python). With --calendar, in
    calendar weeks (simulator.calendar), also the steps a commitment overrode. With --ray
    (or --workers), a registered policy's episodes are played in units of 25 on a Ray
    cluster (or local processes); the figures are the same."""
    from simulator import spec, worlds
    from simulator.evaluate import evaluate
    from simulator.feedback import OBSERVE_CONDITIONS
    from simulator.feedback_eval import evaluate_feedback
    from simulator.policies import policy_names

    student = _student_path(policy)
    if student is None and policy not in policy_names():
        raise typer.BadParameter(
            f"unknown policy {policy!r}; known: {', '.join(policy_names())}, student, student-real, "
            "student:PATH.gguf",
            param_hint="--policy",
        )
    conditions = list(spec.CONDITIONS) if condition == "all" else [condition]
    if conditions[0] not in spec.CONDITIONS:
        raise typer.BadParameter("expected in-dist, ood, discrete or all", param_hint="--condition")
    if world != worlds.NOMINAL and (feedback or observe != "clean"):
        raise typer.BadParameter(
            "--world is measured in the plain protocol: not with --feedback or --observe",
            param_hint="--world",
        )
    if world == ALL_WORLDS and student is not None:
        raise typer.BadParameter(
            "--world all-worlds takes a registered policy; give the student one world at a time",
            param_hint="--world",
        )
    _check_calendar(calendar, read_calendar, student is not None, feedback, observe, world)
    if observe not in OBSERVE_CONDITIONS:
        raise typer.BadParameter(
            f"expected one of {', '.join(OBSERVE_CONDITIONS)}", param_hint="--observe"
        )
    distributed = ray is not None or workers > 1
    if distributed and (student is not None or feedback or observe != "clean"):
        raise typer.BadParameter(
            "--ray and --workers play a registered policy's plain protocol: not a student, "
            "--feedback or --observe",
            param_hint="--ray" if ray is not None else "--workers",
        )
    # a student in a misspecified world plays the plain protocol there, like a policy
    plain = world != worlds.NOMINAL or calendar
    if not plain and (student is not None or feedback or observe != "clean"):
        fresults = {
            c: evaluate_feedback(
                _make_policy(policy, student),
                c,
                feedback,
                observe,
                episodes=episodes,
                seed_offset=seed_offset,
                name=policy,
            )
            for c in conditions
        }
        if json_out:
            payload = {
                "policy": policy,
                "feedback": feedback,
                "observe": observe,
                "results": {c: r.to_dict() for c, r in fresults.items()},
            }
            console.print_json(data=payload)
            return
        results = {c: r.result for c, r in fresults.items()}
        if condition == "all":
            console.print(_three_condition_table(policy, results))
        console.print(_detail_table(policy, results, fresults))
        return
    if world == ALL_WORLDS:
        _eval_all_worlds(policy, conditions, episodes, seed_offset, json_out,
                         _units(ray, workers) if distributed else None)
        return
    try:
        worlds.parse_world(world)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--world") from None
    name = f"{policy} (calendar lines)" if read_calendar else policy
    target = _make_policy(policy, student, read_calendar) if student is not None else policy
    if distributed:
        run = _units(ray, workers)
        results = {c: run(policy, c, episodes, seed_offset, world, calendar) for c in conditions}
    else:
        results = {
            c: evaluate(
                target,
                c,
                episodes=episodes,
                seed_offset=seed_offset,
                world=world,
                calendar=calendar,
                name=name,
            )
            for c in conditions
        }
    nominal = world == worlds.NOMINAL
    # The published figures are for the spec's world, in plain weeks, only.
    published = condition == "all" and nominal and not calendar
    _print_results(name, results, json_out, published, None if nominal else world, calendar)


def _check_calendar(
    calendar: bool, read_calendar: bool, student: bool, feedback: bool, observe: str, world: str
) -> None:
    """Calendar weeks are measured in the plain protocol (simulator.calendar); one line otherwise."""
    if read_calendar and not calendar:
        raise typer.BadParameter("--read-calendar needs --calendar", param_hint="--read-calendar")
    if read_calendar and not student:
        raise typer.BadParameter(
            "--read-calendar is for the student; the agent that reads the calendar is bayes-calendar",
            param_hint="--read-calendar",
        )
    if calendar and (feedback or observe != "clean"):
        raise typer.BadParameter(
            "--calendar is measured in the plain protocol: not with --feedback or --observe",
            param_hint="--calendar",
        )
    if calendar and world == ALL_WORLDS:
        raise typer.BadParameter(
            "--calendar takes one world, not all-worlds", param_hint="--calendar"
        )


def _print_results(
    policy: str,
    results: dict[str, EvalResult],
    json_out: bool,
    published: bool,
    world: str | None,
    calendar: bool = False,
) -> None:
    condition = "all" if published else None
    if json_out:
        payload = {"policy": policy, "results": {c: r.to_dict() for c, r in results.items()}}
        if world is not None:
            payload["world"] = world
        if calendar:
            payload["calendar"] = True
        if condition == "all":
            from simulator.evaluate import PUBLISHED, PUBLISHED_BELIEF_MAE

            payload["published"] = PUBLISHED
            payload["published_belief_mae"] = PUBLISHED_BELIEF_MAE
        console.print_json(data=payload)
        return
    if condition == "all":
        console.print(_three_condition_table(policy, results))
    console.print(_detail_table(policy, results, world=world, calendar=calendar))


def _units(ray: str | None, workers: int):
    """``run(policy, condition, episodes, seed_offset, world, calendar)``: one condition
    evaluated in units on Ray or local processes (agent.lab.eval_units), with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agent.lab.eval_units import evaluate_units
    from rhythm.cli._common import err_console
    from training.executors import executor_for

    executor = executor_for(ray, workers)

    def run(policy: str, condition: str, episodes, seed_offset: int, world: str, calendar: bool):
        columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn()]
        with Progress(*columns, console=err_console, transient=True) as bar:
            task = bar.add_task(f"{policy} {condition} {world} (units)", total=None)
            return evaluate_units(
                executor.map_units, policy, condition, episodes, seed_offset, world, calendar,
                progress=lambda n, total: bar.update(task, completed=n, total=total),
            )

    return run


def _eval_all_worlds(
    policy: str, conditions: list[str], episodes: int | None, seed_offset: int, json_out: bool,
    run=None,
) -> None:
    if len(conditions) != 1:
        raise typer.BadParameter(
            "--world all-worlds takes one condition (in-dist, ood or discrete)",
            param_hint="--condition",
        )
    from simulator import worlds
    from simulator.evaluate import evaluate_worlds

    if run is not None:  # the same seeds in every world, each world's episodes in units
        results = {w: run(policy, conditions[0], episodes, seed_offset, w, False) for w in worlds.WORLDS}
    else:
        results = evaluate_worlds(policy, conditions[0], episodes=episodes, seed_offset=seed_offset)
    if json_out:
        console.print_json(
            data={
                "policy": policy,
                "condition": conditions[0],
                "worlds": {w: r.to_dict() for w, r in results.items()},
            }
        )
        return
    console.print(_worlds_table(policy, conditions[0], results))


def _worlds_table(policy: str, condition: str, results: dict[str, EvalResult]) -> Table:
    t = Table(title=f"{policy}, {condition}: one row per world (same seeds)")
    for col in ("world", "episodes", "final_score ± 95%", "belief_mae", "crashes/week"):
        t.add_column(col, justify="left" if col == "world" else "right")
    for w, r in results.items():
        t.add_row(
            w,
            str(r.episodes),
            f"{r.final_score:.3f} ± {_half(r):.3f}",
            _fmt(r.belief_mae),
            f"{r.crashes_mean:.2f}",
        )
    return t


def _student_path(policy: str):
    """The GGUF of ``student`` (the bundled simulator student, format v1), ``student-real``
    (the bundled product-shaped student, format v4) or ``student:PATH``; None for other names."""
    if policy not in ("student", "student-real") and not policy.startswith("student:"):
        return None
    from pathlib import Path

    if policy in ("student", "student-real"):
        from agent.lab.student_policy import simulator_student_path
        from rhythm.recommend import PRODUCT_MODEL, bundled_model_path

        path = simulator_student_path() if policy == "student" else bundled_model_path(PRODUCT_MODEL)
        if path is None:
            raise typer.BadParameter("no bundled student model in this install", param_hint="--policy")
        return path
    path = Path(policy.split(":", 1)[1]).expanduser()
    if not path.is_file():
        raise typer.BadParameter(f"{path}: model file not found", param_hint="--policy")
    return path


def _make_policy(policy: str, student, read_calendar: bool = False):
    if student is None:
        return policy
    from importlib.util import find_spec

    if find_spec("llama_cpp") is None:
        raise typer.BadParameter(
            "the student needs llama-cpp-python: pip install 'rhythm[ml]'", param_hint="--policy"
        )
    from agent.lab.student_policy import StudentPolicy
    from agent.runtime import check_gguf
    from common.errors import ModelError

    try:
        check_gguf(student)
    except ModelError as exc:
        raise typer.BadParameter(str(exc), param_hint="--policy") from None
    return StudentPolicy.from_gguf(student, read_calendar=read_calendar)


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _three_condition_table(policy: str, results: dict[str, EvalResult]) -> Table:
    from simulator import spec
    from simulator.evaluate import PUBLISHED, PUBLISHED_BELIEF_MAE

    t = Table(title="final_score (spec 9 protocol) beside the published figures")
    t.add_column("policy")
    for c in spec.CONDITIONS:
        t.add_column(_CONDITION_TITLES[c], justify="right")
    t.add_column("belief_mae", justify="right")
    t.add_row(
        f"[bold]{policy}[/bold] (ours)",
        *(f"{results[c].final_score:.3f} ± {_half(results[c]):.3f}" for c in spec.CONDITIONS),
        _fmt(results["in-dist"].belief_mae),
    )
    for name, figures in PUBLISHED.items():
        t.add_row(
            f"{name} (published)",
            *(_fmt(figures[c]) for c in spec.CONDITIONS),
            _fmt(PUBLISHED_BELIEF_MAE.get(name)),
        )
    return t


def _half(r: EvalResult) -> float:
    return (r.final_score_ci95[1] - r.final_score_ci95[0]) / 2


def _detail_table(
    policy: str,
    results: dict[str, EvalResult],
    feedback: dict[str, FeedbackEvalResult] | None = None,
    world: str | None = None,
    calendar: bool = False,
) -> Table:
    from simulator import spec

    where = "" if world in (None, NOMINAL) else f" in world {world}"
    where += " in calendar weeks" if calendar else ""
    t = Table(title=f"{policy}{where}: means over episodes")
    t.add_column("")
    for c in results:
        t.add_column(_CONDITION_TITLES[c], justify="right")
    rs = list(results.values())
    t.add_row("episodes", *(str(r.episodes) for r in rs))
    t.add_row("final_score", *(f"{r.final_score:.3f}" for r in rs))
    t.add_row(
        "95% interval", *(f"{r.final_score_ci95[0]:.3f} – {r.final_score_ci95[1]:.3f}" for r in rs)
    )
    t.add_row("published", *(_fmt(r.published) for r in rs))
    for name, weight in spec.GRADER_WEIGHTS.items():
        t.add_row(f"  {name} (x{weight:.2f})", *(f"{getattr(r, name):.3f}" for r in rs))
    t.add_row("belief_mae", *(_fmt(r.belief_mae) for r in rs))
    t.add_row("crashes / episode", *(f"{r.crashes_mean:.2f}" for r in rs))
    t.add_row("crashes total", *(str(r.crashes_total) for r in rs))
    t.add_row("mean reward", *(f"{r.mean_reward:.3f}" for r in rs))
    if calendar:
        t.add_row("overridden / week", *(_fmt(r.overridden_mean, 2) for r in rs))
    if feedback:
        fs = list(feedback.values())
        t.add_row("observe", *(f.observe for f in fs))
        if fs[0].feedback:
            t.add_row("acceptance", *(_fmt(f.acceptance_rate) for f in fs))
            for days in ("1-2", "6-7"):
                t.add_row(
                    f"  days {days}", *(_fmt((f.acceptance_rate_by_days or {}).get(days)) for f in fs)
                )
        for k in ("2", "4", "8", "16", "28"):
            t.add_row(f"belief_mae after {k} answers", *(_fmt(f.belief_mae_after[k]) for f in fs))
        t.add_row("answers to belief_mae <= 0.15", *(f"{f.answers_to_mae_015:.1f}" for f in fs))
        if fs[0].reference_belief_mae_after is not None:
            for k in ("2", "4", "8", "16", "28"):
                t.add_row(
                    f"  structureless reference after {k}",
                    *(_fmt((f.reference_belief_mae_after or {}).get(k)) for f in fs),
                )
    return t
