"""`rhythm demo`: the whole product on bundled sample data, in a throw-away home."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from rhythm.cli._common import console, get_settings, rows_table
from rhythm.demo import run_demo


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        ctx: typer.Context,
        home: Path | None = typer.Option(
            None, "--demo-home", help="Where to put the demo's database (default: a new temporary folder)."
        ),
    ) -> None:
        """Run Rhythm end to end on bundled sample data (what `make demo` runs)."""
        settings = get_settings(ctx)
        target = home or Path(tempfile.mkdtemp(prefix="rhythm-demo-"))
        result = run_demo(settings, target, say=lambda msg: console.print(msg))
        info = result["db_info"]
        console.print(rows_table(["table", "rows"], sorted(info["tables"].items()), title="database"))
        console.print(f"schema v{info['schema_version']}, {info['file_size_bytes'] / 1e6:.2f} MB at {info['path']}")
