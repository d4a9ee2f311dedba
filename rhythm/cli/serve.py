"""`rhythm serve SOURCE`: receive an app's pushes on this machine (rhythm.serve)."""

from __future__ import annotations

import json
import sys

import typer

from rhythm.cli._common import err_console, get_settings

app = typer.Typer(help="Receive pushes from apps on this machine (127.0.0.1 only).", no_args_is_help=True)


@app.command("hae")
def hae_cmd(
    ctx: typer.Context,
    port: int | None = typer.Option(None, "--port", min=0, max=65535, help="Port on 127.0.0.1 (default: the hae_port setting; 0: any free port)."),
    max_mb: float | None = typer.Option(None, "--max-mb", help="Largest request body in MB (default: the hae_max_mb setting)."),
    json_out: bool = typer.Option(False, "--json", help="Print the address as JSON when ready."),
) -> None:
    """Receive Health Auto Export's REST API automation (JSON or CSV) on 127.0.0.1; stop with Ctrl-C or SIGTERM."""
    from rhythm.serve import SECRET_HEADER, serve

    settings = get_settings(ctx)

    def ready(url: str) -> None:
        if json_out:
            sys.stdout.write(json.dumps({"listening": url}) + "\n")
        else:
            sys.stdout.write(f"listening on {url} (POST with the header {SECRET_HEADER}: <hae_secret>); "
                             "stop with Ctrl-C\n")
        sys.stdout.flush()

    def log(line: str) -> None:
        err_console.print(line, highlight=False, markup=False, soft_wrap=True)

    raise typer.Exit(code=serve(settings, "hae", port, max_mb=max_mb, on_ready=ready, log=log))
