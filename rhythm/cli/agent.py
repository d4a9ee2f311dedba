"""`rhythm recommend` and `rhythm feedback`."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING

import typer
from rich.text import Text

if TYPE_CHECKING:
    from rhythm.recommend import Plan

from rhythm.cli._common import console, get_settings, plain, print_json


def _hm(iso: str | None) -> str:
    return iso[11:16] if iso else "--:--"


def timeline(plan: Plan) -> Text:
    """The day as a timeline: commitments and suggested blocks in time order, with times.
    Titles are imported text: shown as text, never as markup, control characters escaped."""
    from agent.day import PLANNER_NAME  # loaded with the plan already

    d = plan.to_dict()
    items = [(c["start"], 0, c) for c in d["commitments"]] + [(r["start"], 1, r) for r in d["recommendations"]]
    items.sort(key=lambda x: (x[0] or "", x[1]))
    out = Text()
    awake = f" · awake {_hm(d['wake'])}-{_hm(d['bed'])}" if d.get("wake") else ""
    out.append(f"Plan for {plan.day:%A %d %b %Y} ({d['timezone']}){awake}\n", style="bold")
    for _, kind, item in items:
        span = f"{_hm(item['start'])}-{_hm(item['end'])}"
        if kind == 0:
            out.append(f"  {span}  ", style="dim")
            out.append(plain(item["title"])[:48].ljust(48), style="dim")
            out.append(f" {item['action'] or 'commitment'}\n", style="dim")
            continue
        out.append(f"  {span}  ")
        out.append(f"#{item['id']} ", style="cyan")
        out.append(f"{item['action']}", style="bold green")
        out.append(f"  {plain(item['rationale'])}\n")
        for e in item["evidence"]:
            out.append(f"{'':15}· {plain(e)}\n", style="dim")
        if item["model"] != PLANNER_NAME:
            out.append(f"{'':15}· chosen by {plain(item['model'])}\n", style="dim")
    return out


def render_plan(plan: Plan) -> None:
    console.print(timeline(plan), highlight=False, soft_wrap=True)
    if plan.fixed_slots:
        console.print(f"fixed by your calendar: {', '.join(plan.fixed_slots)}", highlight=False)
    b, sd = plan.belief, plan.belief_sd
    console.print(
        f"who you seem to be: social {b[0]:.2f} ±{sd[0]:.2f} · morning {b[1]:.2f} ±{sd[1]:.2f} · "
        f"work {b[2]:.2f} ±{sd[2]:.2f}  [dim](from {plan.observed_slots} observed slots, "
        f"{plan.feedback_used} answers)[/dim]"
    )
    for n in plan.notes:
        console.print(Text.assemble(("note: ", "yellow"), plain(n)), soft_wrap=True)
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
