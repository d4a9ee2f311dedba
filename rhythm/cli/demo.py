"""`rhythm demo`: the whole product on bundled sample data, in a throw-away home."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer
from rich.markup import escape

from rhythm.cli._common import console, get_settings, print_json
from rhythm.cli.agent import render_plan


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
        render_plan(r.plan_obj)
        if r.report is not None:
            filled = sum(r.report.sections.values())
            console.print(f"report {r.report.path} ({filled}/{len(r.report.sections)} sections with data, "
                          f"{r.report.plots} plots)", highlight=False, soft_wrap=True)
