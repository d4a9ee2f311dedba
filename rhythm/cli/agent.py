"""`rhythm recommend` and `rhythm feedback`."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING

import typer
from rich.table import Table

if TYPE_CHECKING:
    from rhythm.recommend import Plan

from rhythm.cli._common import console, get_settings, print_json


def render_plan(plan: Plan) -> None:
    table = Table(title=f"Plan for {plan.day.isoformat()} ({plan.day.strftime('%A')})")
    for col in ("id", "slot", "action", "why", "model"):
        table.add_column(col, overflow="fold")
    for s in plan.slots:
        table.add_row(str(s.id), s.slot, f"[bold]{s.action}[/bold]", s.rationale, s.model)
    console.print(table)
    b, sd = plan.belief, plan.belief_sd
    console.print(
        f"who you seem to be: social {b[0]:.2f} ±{sd[0]:.2f} · morning {b[1]:.2f} ±{sd[1]:.2f} · "
        f"work {b[2]:.2f} ±{sd[2]:.2f}  [dim](from {plan.observed_slots} observed slots, "
        f"{plan.feedback_used} answers)[/dim]"
    )
    for n in plan.notes:
        console.print(f"[yellow]note:[/yellow] {n}")
    if plan.slots:
        console.print(f"[dim]answer with: rhythm feedback {plan.slots[0].id} accept|ignore[/dim]")


def register(app: typer.Typer) -> None:
    @app.command("recommend")
    def recommend_cmd(
        ctx: typer.Context,
        day: str | None = typer.Option(None, "--date", help="Local day to plan (YYYY-MM-DD; default today, from the current slot on)."),
        json_out: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    ) -> None:
        """The plan for the rest of the day, with the belief about you and a reason per slot."""
        try:
            target = date.fromisoformat(day) if day else None
        except ValueError:
            raise typer.BadParameter(f"{day!r} is not a date (YYYY-MM-DD)", param_hint="--date") from None
        from rhythm.jobs import recommend  # the agent and the simulator: loaded to plan

        plan = recommend(get_settings(ctx), target)
        if json_out:
            print_json(plan.to_dict())
        else:
            render_plan(plan)

    @app.command("feedback")
    def feedback_cmd(
        ctx: typer.Context,
        recommendation_id: int = typer.Argument(..., help="The id shown by `rhythm recommend`."),
        response: str = typer.Argument(..., help="accept or ignore."),
        json_out: bool = typer.Option(False, "--json", help="Print the stored answer as JSON."),
    ) -> None:
        """Record your answer (accept/ignore) to a recommendation; the next plan uses it."""
        from rhythm.jobs import feedback

        result = feedback(get_settings(ctx), recommendation_id, response.strip().lower())
        if json_out:
            print_json(result)
        else:
            console.print(f"noted: {result['response']} {result['action']} ({result['local_day']} {result['slot']})")
