"""`rhythm daemon`, `rhythm status` and `rhythm report`: running, watching, reporting."""

from __future__ import annotations

import sys
from datetime import date, datetime
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from rhythm.cli._common import console, err_console, get_settings, plain, print_json, rows_table


def _when(v: Any) -> str:
    if v is None:
        return "never"
    if isinstance(v, str):
        try:
            v = datetime.fromisoformat(v)
        except ValueError:
            return v
    if isinstance(v, datetime):
        return v.astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return str(v)


def _short(text: str | None, n: int = 60) -> str:
    if not text:
        return ""
    return text if len(text) <= n else text[: n - 1] + "…"


def register(app: typer.Typer) -> None:
    @app.command("daemon")
    def daemon_cmd(
        ctx: typer.Context,
        once: bool = typer.Option(False, "--once", help="Run one full cycle now (sync, map, recommend) and exit; for cron."),
        json_out: bool = typer.Option(False, "--json", help="Print results (--once) or the schedule as JSON."),
    ) -> None:
        """Scheduled syncs, the map step and the morning plan (APScheduler); stop with Ctrl-C or SIGTERM."""
        from rhythm.daemon import LOG_FILE, run_daemon, run_once

        settings = get_settings(ctx)
        if once:
            results = run_once(settings)
            if json_out:
                print_json([r.to_dict() for r in results])
            else:
                rows = [(r.job, "ok" if r.ok else "failed", f"{r.seconds:.1f}s",
                         _short(r.error, 90) if r.error and not r.ok else "") for r in results]
                console.print(rows_table(["job", "status", "took", "note"], rows, title="one cycle"))
            failed = [r for r in results if not r.ok]
            for r in failed:
                err_console.print(f"[red]error:[/red] {escape(r.job)}: {escape(plain(r.error or ''))}", highlight=False, soft_wrap=True)
            if failed:
                raise typer.Exit(code=1)
            return

        def ready(jobs: list[dict[str, Any]]) -> None:
            if json_out:
                print_json({"running": True, "jobs": jobs})
                sys.stdout.flush()
                return
            console.print(rows_table(["job", "next run", "does"], [(j["id"], _when(j["next_run"]), j["describe"]) for j in jobs],
                                     title="rhythm daemon"), highlight=False)
            console.print(f"logs {settings.logs_dir / LOG_FILE}; stop with Ctrl-C or SIGTERM", highlight=False)

        code = run_daemon(settings, on_ready=ready, log_stream=None if json_out else sys.stderr)
        raise typer.Exit(code=code)

    @app.command("status")
    def status_cmd(
        ctx: typer.Context,
        json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Health of the pipeline: each source's last sync, cursors, errors, rows, and the next runs."""
        from rhythm.status import DATA_TABLES, pipeline_status

        settings = get_settings(ctx)
        st = pipeline_status(settings)
        if json_out:
            print_json(st)
            return
        console.print(f"database  {st['database']} ({st['database_state']})", highlight=False)
        d = st["daemon"]
        if d["running"]:
            console.print(f"daemon    running (pid {d['pid']}) since {_when(d['started_at'])}", highlight=False)
        elif d.get("stopped_at"):
            console.print(f"daemon    not running (stopped {_when(d['stopped_at'])})", highlight=False)
        else:
            console.print("daemon    not running", highlight=False)
        if st["sources"]:
            rows = []
            for s in st["sources"]:
                cursors = "; ".join(f"{c['stream']}={_short(c['cursor'], 28) or '—'}" for c in s["streams"])
                last = s["last_sync"] if s["kind"] == "api" else s["last_import"]
                counts = ", ".join(f"{t} {s['rows'][t]}" for t in DATA_TABLES if s["rows"][t]) or "none"
                rows.append((s["source"], s["kind"], _when(last), _short(cursors, 70), counts,
                             _short(s["last_error"], 70)))
            console.print(rows_table(["source", "kind", "last sync/import", "cursors", "rows", "error"], rows,
                                     title="sources"))
        else:
            console.print("no sources yet: `rhythm import ...` an export or `rhythm auth whoop|google`", highlight=False)
        if st["derived"]:
            der = st["derived"]
            days = der["meter_days"]
            console.print(
                "derived   " + ", ".join(f"{k} {v}" for k, v in der["rows"].items())
                + (f"; meters {days[0]} .. {days[1]}" if days else "")
                + f"; last map {_when(der['last_map'])}; last plan {_when(der['last_recommendation'])}",
                highlight=False,
            )
        if st["schedule"]:
            console.print(rows_table(["job", "next run", "does", "according to"],
                                     [(j["job"], _when(j["next_run"]), j["describe"], j["by"]) for j in st["schedule"]],
                                     title="schedule"))
        for p in st["problems"]:
            err_console.print(f"[yellow]note:[/yellow] {escape(plain(p))}", highlight=False, soft_wrap=True)

    @app.command("report")
    def report_cmd(
        ctx: typer.Context,
        days: int = typer.Option(28, "--days", min=1, help="How many days, ending today."),
        out: Path | None = typer.Option(None, "--out", help="Where to write the HTML (default RHYTHM_HOME/reports/)."),
        day: str | None = typer.Option(None, "--date", help="Treat this day (YYYY-MM-DD) as today."),
        json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """A self-contained HTML report: meters, what you did, recommendations, belief, today's plan."""
        from common.errors import ConfigError
        from rhythm.report import write_report

        settings = get_settings(ctx)
        today = None
        if day:
            try:
                today = date.fromisoformat(day)
            except ValueError:
                raise ConfigError(f"--date: expected YYYY-MM-DD, got {day!r}") from None
        rep = write_report(settings, days=days, today=today, out=out)
        if json_out:
            print_json({"path": rep.path, "sections": rep.sections, "plots": rep.plots})
            return
        empty = [k for k, v in rep.sections.items() if not v]
        console.print(f"report {rep.path}", highlight=False, soft_wrap=True)
        console.print(f"{rep.plots} plots" + (f"; no data yet for: {', '.join(empty)}" if empty else ""), highlight=False)
