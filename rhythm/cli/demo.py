"""`rhythm demo`: the whole product on bundled sample data, in a throw-away home."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from rhythm.cli._common import console, get_settings, print_json, rows_table


def belief_text(belief: Any, sd: Any) -> str:
    if not belief:
        return ""
    sd = list(sd or [])
    from rhythm.report import BELIEFS

    parts = []
    for i, m in enumerate(belief):
        name = BELIEFS[i] if i < len(BELIEFS) else f"b{i}"
        s = sd[i] if i < len(sd) and sd[i] is not None else None
        parts.append(f"{name} {m:.2f}" + (f" ± {s:.2f}" if s is not None else ""))
    return ", ".join(parts)


def render_plan(plan: dict[str, Any], plan_obj: Any = None) -> None:
    """The plan as `rhythm recommend` shows it; a plain table if that renderer is absent."""
    try:
        from rhythm.cli.agent import render_plan as recommend_render
        from rhythm.recommend import Plan
    except ImportError:
        recommend_render = None
    if recommend_render is not None and isinstance(plan_obj, Plan):
        recommend_render(plan_obj)
        return
    rows = [(s["slot"], s["action"], belief_text(s["belief"], s["belief_sd"]), s["rationale"], s["model"])
            for s in plan["slots"]]
    console.print(rows_table(["slot", "do", "belief", "why", "model"], rows, title=f"plan for {plan['day']}"))
    if plan["slots"]:
        last = plan["slots"][-1]
        console.print(f"belief about you: {belief_text(last['belief'], last['belief_sd']) or 'none yet'}", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        ctx: typer.Context,
        home: Path | None = typer.Option(
            None, "--demo-home", help="Where to put the demo's database (default: a new temporary folder)."
        ),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Run Rhythm end to end on bundled sample data (what `make demo` runs)."""
        settings = get_settings(ctx)
        target = (home or Path(tempfile.mkdtemp(prefix="rhythm-demo-"))).expanduser()
        say = (lambda _m: None) if json_out else (lambda msg: console.print(escape(msg), highlight=False, soft_wrap=True))
        if not json_out:
            console.print("[bold]Rhythm demo[/bold]: five weeks of Mara (a morning person in Utrecht who "
                          "socialises on weekends), today = the sample's last day", highlight=False)
            console.print(f"demo home {target}", highlight=False, soft_wrap=True)
        from rhythm.demo import run_demo  # the whole app: loaded only for the demo

        r = run_demo(settings, target, say=say)
        if json_out:
            print_json({
                "home": r.home, "today": r.today, "imports": r.imports, "mapped": r.mapped, "plan": r.plan,
                "notes": r.notes, "report": r.report.path if r.report else None, "tables": r.tables,
            })
            return
        if r.plan is not None:
            render_plan(r.plan, r.plan_obj)
        else:
            console.print(f"no plan: {'; '.join(r.notes)}", highlight=False)
        if r.report is not None:
            filled = sum(r.report.sections.values())
            console.print(f"report {r.report.path} ({filled}/{len(r.report.sections)} sections with data, "
                          f"{r.report.plots} plots)", highlight=False, soft_wrap=True)
