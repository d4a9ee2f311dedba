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

        settings = get_settings(ctx)
        plan = recommend(settings, target)
        if json_out:
            print_json(plan.to_dict())
        else:
            render_plan(plan)
            render_yesterday(settings, plan.day)

    @app.command("feedback")
    def feedback_cmd(
        ctx: typer.Context,
        recommendation_id: int | None = typer.Argument(None, help="The id shown by `rhythm recommend`."),
        response: str | None = typer.Argument(None, help="accept or ignore."),
        review: bool = typer.Option(False, "--review", help="Walk through the last two days' blocks the data "
                                    "could not tell (or only doubtfully): a=accept i=ignore s=skip q=quit."),
        json_out: bool = typer.Option(False, "--json", help="Print the stored answer as JSON."),
    ) -> None:
        """Record your answer (accept/ignore) to a recommendation; the next plan uses it."""
        from rhythm.jobs import feedback

        if review:
            review_answers(get_settings(ctx))
            return
        if recommendation_id is None or response is None:
            raise typer.BadParameter("give a recommendation id and accept|ignore, or --review",
                                     param_hint="RECOMMENDATION_ID RESPONSE")
        result = feedback(get_settings(ctx), recommendation_id, response.strip().lower())
        if json_out:
            print_json(result)
        else:
            console.print(f"noted: {result['response']} {result['action']} ({result['local_day']} {result['slot']})")


# -- what happened to the blocks (issue 38) -----------------------------------------------------
def _review_rows(settings, lo: date, hi: date, doubtful_only: bool = False) -> list[dict]:
    from rhythm.implicit import review
    from rhythm.settings import user_zone
    from storage import open_db

    if not settings.database.exists():
        return []
    with open_db(settings.database, read_only=True) as db:
        if "answers_implicit" not in db.tables():
            return []
        rows = review(db, lo, hi, tz=user_zone(settings))
    return [r for r in rows if r["doubtful"]] if doubtful_only else rows


def _last_planned(settings) -> date | None:
    """The latest planned day up to today (a history imported from the past reviews its own days)."""
    from rhythm.settings import local_today
    from storage import open_db
    from storage.implicit import last_planned_day

    if not settings.database.exists():
        return None
    with open_db(settings.database, read_only=True) as db:
        return last_planned_day(db, local_today(settings))


def render_yesterday(settings, day: date) -> None:
    """Yesterday's blocks with what the data says happened, and why."""
    from datetime import timedelta

    from rhythm.implicit import review_line

    rows = _review_rows(settings, day - timedelta(days=1), day - timedelta(days=1))
    if not rows:
        return
    console.print(Text(f"Yesterday ({day - timedelta(days=1):%a %d %b})", style="bold"))
    for r in rows:
        style = {"done": "green", "not done": "yellow"}.get(r["status"], "dim")
        console.print(Text.assemble(f"  #{r['id']} ", (plain(review_line(r)), style)), soft_wrap=True)
    if any(r["doubtful"] for r in rows):
        console.print("[dim]correct or confirm: rhythm feedback --review[/dim]")


def _key(prompt: str) -> str:
    """One key: a single keypress on a terminal; the first letter of a line otherwise."""
    import sys

    import click

    console.print(prompt, end="", highlight=False)
    if sys.stdin.isatty():
        ch = click.getchar()
        console.print(ch)
        return ch.lower()
    line = sys.stdin.readline()
    return (line.strip()[:1] or "q").lower()


def review_answers(settings) -> None:
    """`rhythm feedback --review`: the last two days' unknown or doubtful blocks, one key each."""
    from datetime import timedelta

    from rhythm.implicit import review_line
    from rhythm.jobs import feedback
    from rhythm.settings import local_today

    today = _last_planned(settings) or local_today(settings)
    rows = _review_rows(settings, today - timedelta(days=2), today, doubtful_only=True)
    if not rows:
        console.print("nothing to review: every past block is answered or the data was sure")
        return
    stored = 0
    for r in rows:
        console.print(Text.assemble((f"#{r['id']} {r['local_day']} ", "cyan"), plain(review_line(r))), soft_wrap=True)
        while True:
            k = _key("  [a]ccept (I did it)  [i]gnore (I did not)  [s]kip  [q]uit: ")
            if k in ("a", "i", "s", "q"):
                break
        if k == "q":
            break
        if k == "s":
            continue
        feedback(settings, r["id"], "accept" if k == "a" else "ignore")
        stored += 1
    console.print(f"{stored} answer{'s' if stored != 1 else ''} stored")
