"""`rhythm train`: the student's distillation pipeline (thin: parse, call training/, render).

Each stage is a subcommand with its script's settings as ``--set name=value`` (see
``python -m training.<stage> --help`` for the names); ``all --budget smoke|medium|full``
runs every stage in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rhythm.cli._common import console, err_console, print_json

app = typer.Typer(
    help="Train the on-device student: teacher rollouts -> dataset -> SFT -> LoRA -> GGUF -> evaluation.",
    no_args_is_help=True,
)

SET_HELP = "Stage setting as name=value (repeatable; lists comma-separated). See `python -m training.<stage> --help`."


@contextmanager
def _progress() -> Iterator[Any]:
    """A rich progress bar per stage, driven by the library's ``(stage, done, total)`` callback."""
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=err_console, transient=False) as progress:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: float, total: float | None) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(stage, total=total)
            progress.update(tasks[stage], completed=done, total=total)

        yield update


def _overrides(sets: list[str], **fixed: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in sets:
        name, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected name=value, got {item!r}", param_hint="--set")
        out[name.strip()] = value
    out.update({k: v for k, v in fixed.items() if v is not None})
    return out


def _run(module: str, sets: list[str], json_out: bool, **fixed: Any) -> Any:
    import importlib

    from training.common import args_from

    mod = importlib.import_module(f"training.{module}")
    try:
        args = args_from(mod.Args, _overrides(sets, **fixed))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--set") from None
    from common.errors import ModelError

    with _progress() as update:
        try:
            result = mod.main(args, update)
        except ValueError as exc:  # bad settings or inputs: one line, not a traceback
            raise ModelError(f"train {module}: {exc}") from exc
    if json_out:
        print_json(result if isinstance(result, dict) else {"output": str(result)})
    else:
        console.print(f"{module}: {result if not isinstance(result, dict) else 'done'}")
    return result


_SET = typer.Option([], "--set", "-s", help=SET_HELP)
_JSON = typer.Option(False, "--json", help="Print the stage's result as JSON.")
_RAY = typer.Option(
    None,
    "--ray",
    metavar="ADDRESS",
    help="Run the units on a Ray cluster: its address, auto (the cluster this machine joined "
    "with `ray start`) or local (a private runtime here). Needs pip install 'rhythm\\[cluster]'.",
)


@app.command("rollouts")
def rollouts_cmd(
    out: str = typer.Option(None, "--out", help="Output folder."),
    episodes: int = typer.Option(None, "--episodes", min=1, help="Teacher weeks to play."),
    teacher: str = typer.Option(
        None, "--teacher", help="Registered policy playing (default bayes)."
    ),
    ray: str = _RAY,
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Stage 1: teacher rollouts as versioned JSONL. Run again after an interruption, it
    continues from the units already written."""
    if ray:  # Ray missing or the cluster unreachable: one line before the progress bar
        from training.executors import executor_for

        executor_for(ray)
    _run("rollouts", sets, json_out, out=out, episodes=episodes, teacher=teacher, ray=ray)


@app.command("streams")
def streams_cmd(
    out: str = typer.Option(..., "--out", help="Output folder (rollouts.jsonl, summary.json)."),
    people: int = typer.Option(200, "--people", min=1, help="Generated people (about 3-4 weeks each)."),
    seed_start: int = typer.Option(1_000_000, "--seed-start", min=0, help="First person's seed."),
    workers: int = typer.Option(1, "--workers", min=1, help="Worker processes."),
    ray: str = _RAY,
    json_out: bool = _JSON,
) -> None:
    """Stage 1b: real-shaped weeks through the product's own path (generated people's wearable
    and calendar records, stored, mapped and read back as `rhythm recommend` reads them),
    labelled by the Bayesian teacher. Feed the JSONL to `dataset --rollouts` beside the
    simulated weeks (docs/training.md). Run again after an interruption, it continues from
    the people already written."""
    from pathlib import Path

    from lab.streams import write_streams
    from training.executors import executor_for

    executor = executor_for(ray, workers)
    with _progress() as update:
        summary = write_streams(Path(out), people, seed_start, workers,
                                progress=lambda n, total: update("streams", n, total),
                                executor=executor)
    if json_out:
        print_json(summary)
    else:
        console.print(f"streams: {summary['weeks']} weeks, {summary['decisions']} decisions from "
                      f"{summary['people']} people in {summary['seconds']:.0f} s -> {out}/rollouts.jsonl")


@app.command("planner-days")
def planner_days_cmd(
    out: str = typer.Option(..., "--out", help="Output folder (examples.jsonl, summary.json)."),
    people: int = typer.Option(200, "--people", min=1, help="Generated people (office, shift, parent... and stream people)."),
    seed_start: int = typer.Option(3_000_000, "--seed-start", min=0, help="First person's seed."),
    days: int = typer.Option(10, "--days", min=1, help="Planned days per person."),
    workers: int = typer.Option(2, "--workers", min=1, help="Worker processes."),
    run_share: float = typer.Option(0.5, "--run-share", min=0.0, max=1.0,
                                    help="Share of the morning asks at the daily run's hours (06:00-07:30)."),
    history: bool = typer.Option(True, "--history/--no-history",
                                 help="Store each plan and answer each day by a hidden rule drawn per person."),
    json_out: bool = _JSON,
) -> None:
    """Stage 1c: decisions labelled by the day planner (issue 37): generated people stored and
    mapped, then at a drawn time of each morning, afternoon and evening the product's prompt
    for the slot and the planner's block action there; with --history (the default) each plan
    is stored and each day answered by a hidden rule, so later days carry answers. Re-run it after the planner changes;
    `python -m training.planner_tune` fine-tunes the bundled student on the result
    (docs/training.md, "Planner days")."""
    from pathlib import Path

    from lab.planner_days import write_examples

    with _progress() as update:
        summary = write_examples(Path(out), people, seed_start, days, workers, run_share=run_share,
                                 history=history, progress=lambda n, total: update("planner-days", n, total))
    if json_out:
        print_json(summary)
    else:
        console.print(f"planner-days: {summary['decisions']} decisions from {summary['people']} people in "
                      f"{summary['seconds']:.0f} s ({summary['decisions_per_second']}/s) -> {out}/examples.jsonl")


@app.command("planner-tune")
def planner_tune_cmd(
    examples: list[str] = typer.Option(None, "--examples", help="examples.jsonl of planner-days."),
    out: str = typer.Option(None, "--out", help="Output folder."),
    minutes: float = typer.Option(None, "--minutes", help="SFT wall-clock budget."),
    base: str = typer.Option(None, "--base", help="Student GGUF to continue from (default the bundled one)."),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Fine-tune the bundled student on planner-days decisions: a new Q8_0 GGUF, its parity
    with PyTorch and the agreement with the planner on held-out people before and after."""
    _run("planner_tune", sets, json_out, examples=examples or None, out=out, minutes=minutes, base=base)


@app.command("dataset")
def dataset_cmd(
    rollouts: list[str] = typer.Option(None, "--rollouts", help="Rollout JSONL file(s)."),
    out: str = typer.Option(None, "--out", help="Output folder."),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Stage 2: compact-text dataset with answer masks, and the tokenizer."""
    _run("dataset", sets, json_out, out=out, rollouts=rollouts or None)


@app.command("sft")
def sft_cmd(
    data: str = typer.Option(None, "--data", help="Dataset folder."),
    out: str = typer.Option(None, "--out", help="Output folder."),
    minutes: float = typer.Option(None, "--minutes", help="Wall-clock budget."),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Stage 3: train the student from scratch."""
    _run("sft", sets, json_out, data=data, out=out, minutes=minutes)


@app.command("dagger")
def dagger_cmd(
    student: str = typer.Option(None, "--student", help="Student GGUF or checkpoint folder."),
    out: str = typer.Option(None, "--out", help="Output folder."),
    episodes: int = typer.Option(None, "--episodes", min=1, help="Weeks the student plays."),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Stage 3b: the student plays weeks, the teacher labels every step (DAgger); then
    `dataset --rollouts TEACHER.jsonl --rollouts dagger.jsonl` and `sft --set init_from=...`."""
    _run("dagger", sets, json_out, student=student, out=out, episodes=episodes)


@app.command("probe")
def probe_cmd(
    checkpoint: str = typer.Option(None, "--checkpoint", help="Student checkpoint."),
    data: str = typer.Option(None, "--data", help="Dataset folder (its held-out weeks)."),
    out: str = typer.Option(None, "--out", help="Output folder."),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Diagnosis: does the student read the person from the meters, or copy the beliefs in
    its context? Teacher-forced belief errors with earlier beliefs shown and blinded."""
    _run("reading_probe", sets, json_out, checkpoint=checkpoint, data=data, out=out)


@app.command("refine")
def refine_cmd(
    ctx: typer.Context,
    checkpoint: str = typer.Option(None, "--checkpoint", help="Stage 4: base student checkpoint."),
    data: str = typer.Option(None, "--data", help="Stage 4: one person's dataset."),
    out: str = typer.Option(None, "--out", help="Stage 4: output folder."),
    base: str = typer.Option(None, "--base", help="From your answers: the GGUF to start from (default the bundled student)."),
    steps: int = typer.Option(30, "--steps", min=1, help="From your answers: LoRA steps."),
    reset: bool = typer.Option(False, "--reset", help="Remove your refined student (back to the bundled one)."),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Refine the student on your own answers and install it for `rhythm recommend`.

    With --checkpoint/--data: stage 4 of the pipeline instead (a LoRA adapter on a simulated
    person's dataset)."""
    if checkpoint or data or out or sets:
        _run("refine", sets, json_out, checkpoint=checkpoint, data=data, out=out)
        return
    from rhythm import refine as personal
    from rhythm.cli._common import get_settings
    from rhythm.runner import recorded, session

    settings = get_settings(ctx)
    if reset:
        found = personal.reset(settings)
        console.print("refined student removed" if found else "no refined student installed")
        return
    with session(settings, "rhythm train refine") as db:
        with _progress() as update:
            report = personal.refine(db, settings, base=base, steps=steps, progress=update)
        with recorded(db, "refine", None, report["model"]) as run:
            run.summary = {k: report[k] for k in ("answers", "examples", "targets_changed", "steps")}
    if json_out:
        print_json(report)
        return
    console.print(
        f"refined on {report['examples']} of your answers ({report['targets_changed']} with a different target), "
        f"{report['steps']} steps in {report['seconds']:.0f} s; answer loss {report['answer_loss_before']:.3f} -> "
        f"{report['answer_loss_after']:.3f}"
    )
    console.print(f"installed {report['model']}: `rhythm recommend` uses it (`rhythm train refine --reset` to undo)")


@app.command("export")
def export_cmd(
    checkpoint: str = typer.Option(None, "--checkpoint", help="Student checkpoint."),
    data: str = typer.Option(None, "--data", help="Dataset folder (parity prompts)."),
    out: str = typer.Option(None, "--out", help="Output folder."),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Stage 5: GGUF, quantization and the PyTorch/llama.cpp parity check."""
    _run("export", sets, json_out, checkpoint=checkpoint, data=data, out=out)


@app.command("calibrate")
def calibrate_cmd(
    model: str = typer.Option(None, "--model", help="Student GGUF to calibrate."),
    data: str = typer.Option(None, "--data", help="Dataset of teacher weeks it was not trained on."),
    out: str = typer.Option(None, "--out", help="Output folder."),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Stage 5b: an action bias in the GGUF so each action is chosen about as often as the
    teacher chooses it (fitted and judged on held-out teacher weeks)."""
    _run("calibrate", sets, json_out, model=model, data=data, out=out)


@app.command("evaluate")
def evaluate_cmd(
    students: list[str] = typer.Option(
        None, "--student", help="name=path (checkpoint folder or .gguf); repeatable."
    ),
    out: str = typer.Option(None, "--out", help="Output folder."),
    results_md: str = typer.Option(
        None, "--results-md", help="Markdown report path (e.g. docs/results.md)."
    ),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Stage 6: the three-condition table, plot and markdown report."""
    _run("evaluate", sets, json_out, students=students or None, out=out, results_md=results_md)


@app.command("all")
def all_cmd(
    budget: str = typer.Option(
        "smoke", "--budget", help="smoke (CI, ~2 min), medium or full (< 2 h)."
    ),
    out: str = typer.Option(None, "--out", help="Output root (default runs/<budget>)."),
    results_md: str = typer.Option(
        None, "--results-md", help="Markdown report path (e.g. docs/results.md)."
    ),
    ship: bool = typer.Option(
        False, "--ship", help="Copy the Q8_0 student and its model card into the package."
    ),
    sets: list[str] = _SET,
    json_out: bool = _JSON,
) -> None:
    """Every stage in order under a budget preset."""
    from training.pipeline import BUDGETS

    if budget not in BUDGETS:
        raise typer.BadParameter(f"expected one of {', '.join(BUDGETS)}", param_hint="--budget")
    _run(
        "pipeline",
        sets,
        json_out,
        budget=budget,
        out=out or f"runs/{budget}",
        results_md=results_md,
        ship=ship or None,
    )
