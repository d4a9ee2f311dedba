"""`rhythm sync [SOURCE ...]`: incremental API syncs from stored cursors (rhythm.jobs.sync)."""

from __future__ import annotations

import typer
from rich.markup import escape

from connectors.registry import api_syncs
from rhythm.cli._common import console, err_console, get_settings, plain, print_json, rows_table


def register(app: typer.Typer) -> None:
    @app.command("sync")
    def sync_cmd(
        ctx: typer.Context,
        sources: list[str] = typer.Argument(None, help=f"Sources to sync ({', '.join(api_syncs())}); default: every authorised one."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Fetch what changed since the last sync (WHOOP, Google Calendar, Garmin Connect, ...)."""
        from rhythm.jobs import sync

        settings = get_settings(ctx)
        with err_console.status("syncing ...") as status:

            def progress(source: str, records: int) -> None:
                status.update(f"syncing {source}: {records} records")

            result = sync(settings, sources or None, progress=progress)
        if json_out:
            print_json(result)
        elif not result["sources"]:
            names = " | ".join(api_syncs())
            console.print(f"nothing to sync: authorise a source first (rhythm auth {names})", highlight=False)
        else:
            rows = []
            for name, r in result["sources"].items():
                if r["ok"]:
                    new = sum(t["inserted"] for t in r["tables"].values())
                    deleted = sum(t["deleted"] for t in r["tables"].values())
                    rows.append((name, "ok", r["records"], new, deleted))
                else:
                    rows.append((name, "failed", "", "", ""))
            console.print(rows_table(["source", "status", "records", "new rows", "deleted"], rows, title="sync"))
        failed = [(n, r["error"]) for n, r in result["sources"].items() if not r["ok"]]
        for _name, line in failed:
            err_console.print(f"[red]error:[/red] {escape(plain(line))}", highlight=False, soft_wrap=True)
        if failed:
            raise typer.Exit(code=1)
