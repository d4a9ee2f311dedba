"""`rhythm sim`: evaluate policies on the simulator (thin: parse, call simulator.evaluate, render)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from simulator import spec
from simulator.evaluate import PUBLISHED, PUBLISHED_BELIEF_MAE, EvalResult, evaluate
from simulator.policies import policy_names

app = typer.Typer(
    help="Simulator: evaluate policies on the hidden-person week.", no_args_is_help=True
)
console = Console()

_CONDITION_TITLES = {"in-dist": "in-dist", "ood": "OOD", "discrete": "discrete-3"}


@app.callback()
def sim() -> None:
    """Simulator: evaluate policies on the hidden-person week."""
    register_app_policies()


def register_app_policies() -> None:
    """The app shell plugs the agents of agent/ into the simulator's registry by name."""
    from agent.policies import register_agent_policies

    register_agent_policies()


@app.command("policies")
def policies_cmd() -> None:
    """List the registered policy names."""
    for name in policy_names():
        console.print(name, highlight=False)


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
) -> None:
    """Evaluate a policy: final_score mean with 95% interval, grader components, belief_mae, crashes."""
    if policy not in policy_names():
        raise typer.BadParameter(
            f"unknown policy {policy!r}; known: {', '.join(policy_names())}", param_hint="--policy"
        )
    conditions = list(spec.CONDITIONS) if condition == "all" else [condition]
    if conditions[0] not in spec.CONDITIONS:
        raise typer.BadParameter("expected in-dist, ood, discrete or all", param_hint="--condition")
    results = {
        c: evaluate(policy, c, episodes=episodes, seed_offset=seed_offset) for c in conditions
    }

    if json_out:
        payload = {"policy": policy, "results": {c: r.to_dict() for c, r in results.items()}}
        if condition == "all":
            payload["published"] = PUBLISHED
            payload["published_belief_mae"] = PUBLISHED_BELIEF_MAE
        console.print_json(data=payload)
        return
    if condition == "all":
        console.print(_three_condition_table(policy, results))
    console.print(_detail_table(policy, results))


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _three_condition_table(policy: str, results: dict[str, EvalResult]) -> Table:
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


def _detail_table(policy: str, results: dict[str, EvalResult]) -> Table:
    t = Table(title=f"{policy}: means over episodes")
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
    return t
