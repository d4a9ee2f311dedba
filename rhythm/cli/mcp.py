"""`rhythm mcp`: serve the local database to an MCP client (an assistant). See docs/mcp.md."""

from __future__ import annotations

import sys

import typer

from rhythm.cli._common import err_console, get_settings


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp_cmd(
        ctx: typer.Context,
        http: bool = typer.Option(False, "--http", help="Serve streamable HTTP on 127.0.0.1 instead of stdio."),
        port: int | None = typer.Option(None, "--port", help="HTTP port on 127.0.0.1 (default 8765; 0: any free port)."),
        host: str | None = typer.Option(None, "--host", help="HTTP address: 127.0.0.1 only (others are refused)."),
    ) -> None:
        """Serve your data to an MCP client: meters, plan, explanations, feedback, read-only SQL (stdio by default)."""
        from common.errors import ConfigError
        from rhythm.mcp import serve
        from rhythm.mcp.server import DEFAULT_PORT, HOST

        if not http and (port is not None or host is not None):
            raise ConfigError("--port and --host apply to --http (stdio needs neither)")

        def ready(url: str) -> None:
            err_console.print(f"Rhythm MCP server listening on {url} (127.0.0.1 only; Ctrl-C stops it)",
                              highlight=False, soft_wrap=True)

        if not http and sys.stdin.isatty():
            err_console.print("rhythm mcp speaks the Model Context Protocol on stdin/stdout: an MCP client starts it "
                              "(docs/mcp.md shows the configuration). Ctrl-C stops it.", highlight=False, soft_wrap=True)
        serve(get_settings(ctx), http=http, host=host or HOST, port=DEFAULT_PORT if port is None else port,
              on_ready=ready)
