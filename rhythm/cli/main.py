"""Root Typer app: global options and the storage commands (init, sql, export, db info)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import typer

from rhythm.cli._common import (
    State,
    console,
    get_settings,
    natural_width,
    print_json,
    rows_csv,
    rows_table,
    rows_vertical,
)
from rhythm.settings import init_home, load_settings, with_db

app = typer.Typer(
    help="Rhythm: your wearables and calendar, turned into a plan that fits you. Local and private.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version() -> str:
    try:
        return version("rhythm")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def _show_version(value: bool) -> None:
    if value:
        console.print(f"rhythm {_version()}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    db: Path | None = typer.Option(None, "--db", help="Database file (default RHYTHM_HOME/rhythm.duckdb)."),
    home: Path | None = typer.Option(None, "--home", help="Rhythm home folder (default $RHYTHM_HOME or ~/.rhythm)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
    version_: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Rhythm command line."""
    settings = with_db(load_settings(home=home, debug=debug or None), db)
    ctx.obj = State(settings=settings)


@app.command("init")
def init_cmd(ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Create RHYTHM_HOME, its config.toml and the migrated database."""
    s = get_settings(ctx)
    made = init_home(s)
    from storage import open_db  # DuckDB loads only for the commands that open it

    with open_db(s.database, migrate=False) as db:
        applied = db.migrate()
        version_now = db.schema_version()
    result = {
        "home": s.home,
        "database": s.database,
        "created": [str(p) for p in made],
        "migrations_applied": applied,
        "schema_version": version_now,
    }
    if json_out:
        print_json(result)
        return
    console.print(f"home      {s.home}")
    console.print(f"database  {s.database} (schema v{version_now})")
    if applied:
        console.print(f"applied   {', '.join(applied)}")
    else:
        console.print("database already up to date")


@app.command("sql")
def sql_cmd(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="SQL to run (read-only: SELECT, WITH, DESCRIBE, SHOW, EXPLAIN)."),
    csv_out: bool = typer.Option(False, "--csv", help="Print CSV."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (a list of objects)."),
    vertical: bool = typer.Option(
        False, "--vertical", "-x", help="One block per row, one line per column (automatic when a table is too wide)."
    ),
) -> None:
    """Run read-only SQL on your database; tables: samples, events, meters, ..."""
    s = get_settings(ctx)
    from storage import open_db

    with open_db(s.database, read_only=True) as db:
        columns, rows = db.query(query)
    if json_out:
        print_json([dict(zip(columns, r, strict=True)) for r in rows])
    elif csv_out:
        typer.echo(rows_csv(columns, rows), nl=False)
    else:
        wide = natural_width(columns, rows) > console.width
        if vertical or (wide and rows):
            console.print(rows_vertical(columns, rows), end="")
        else:
            console.print(rows_table(columns, rows))
        note = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
        if wide and not vertical and rows:
            note += f" (shown one per block: {len(columns)} columns are wider than the terminal; --csv or --json for files)"
        console.print(note, style="dim", highlight=False)


@app.command("export")
def export_cmd(
    ctx: typer.Context,
    out_dir: Path = typer.Argument(..., help="Folder to write one Parquet file per table into."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Export every table to Parquet (one file per table)."""
    s = get_settings(ctx)
    from storage import open_db

    with open_db(s.database, read_only=True, sandbox=False) as db:  # it writes files: no sandbox
        written = db.export_parquet(out_dir)
        counts = db.row_counts()
    if json_out:
        print_json({t: {"path": p, "rows": counts[t]} for t, p in written.items()})
        return
    console.print(rows_table(["table", "rows", "file"], [(t, counts[t], p) for t, p in written.items()]))


db_app = typer.Typer(help="Inspect the database.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("info")
def db_info_cmd(ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Tables with row counts, file size and schema version."""
    s = get_settings(ctx)
    from storage import open_db

    with open_db(s.database, read_only=True) as db:
        info = db.info()
    if json_out:
        print_json(info)
        return
    console.print(f"database  {info['path']}")
    console.print(f"size      {info['file_size_bytes'] / 1e6:.2f} MB")
    console.print(f"schema    v{info['schema_version']} ({', '.join(info['migrations'])})")
    console.print(rows_table(["table", "rows"], sorted(info["tables"].items()), title="tables"))
    console.print(f"views     {', '.join(info['views'])}")


@db_app.command("prune")
def db_prune_cmd(
    ctx: typer.Context,
    before: str | None = typer.Option(None, "--before", help="Remove rows of local days before this day (YYYY-MM-DD)."),
    after: str | None = typer.Option(None, "--after", help="Remove rows of local days after this day (YYYY-MM-DD)."),
    source: str | None = typer.Option(None, "--source", help="Remove rows of this source only (alone: all of it, raw payloads too)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only count what would be removed."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Remove stored rows by day and/or source, in one transaction (repairs bad imports)."""
    from datetime import date

    from common.errors import ConfigError
    from rhythm.jobs import prune

    def day(v: str | None, flag: str) -> date | None:
        try:
            return date.fromisoformat(v) if v else None
        except ValueError:
            raise ConfigError(f"{flag}: expected a day as YYYY-MM-DD, got {v!r}") from None

    result = prune(get_settings(ctx), before=day(before, "--before"), after=day(after, "--after"),
                   source=source, dry_run=dry_run)
    if json_out:
        print_json(result)
        return
    rows = [(t, n) for t, n in result["tables"].items()]
    verb = "would remove" if dry_run else "removed"
    console.print(rows_table(["table", f"rows {verb}"], rows))
    if not dry_run and any(result["tables"].get(t) for t in ("samples", "sleep_sessions", "workouts", "events")):
        console.print("[dim]run `rhythm map` to rebuild the meters[/dim]", highlight=False)


@app.command("sources")
def sources_cmd(
    ctx: typer.Context,
    set_: list[str] = typer.Option(
        None, "--set", help="Change a group's device order, e.g. --set sleep=strap,ring,watch,phone (repeatable)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Which source counts for each metric (one per metric and window), and the rows each has."""
    from common.errors import ConfigError
    from rhythm.jobs import set_source_priority
    from storage import overview

    s = get_settings(ctx)
    for item in set_ or []:
        group, sep, kinds = item.partition("=")
        if not sep:
            raise ConfigError(f"--set: expected GROUP=kind,kind,..., got {item!r}")
        set_source_priority(s, group.strip(), [k.strip() for k in kinds.split(",") if k.strip()])
    from storage import open_db

    with open_db(s.database, read_only=True) as db:
        report = overview.source_report(db)
        priority = overview.source_priority(db)
    if json_out:
        print_json({"priority": priority, "sources": report})
        return
    console.print(rows_table(["group", "device kinds, best first"], [(g, " > ".join(k)) for g, k in priority.items()],
                             title="priority"))
    rows = [(r["metric"], r["source"], r["source_name"], r["kind"], r["rows"], r["used"]) for r in report]
    console.print(rows_table(["metric", "source", "device / app", "kind", "rows", "rows counted"], rows,
                             title="sources per metric"))


def _mount() -> None:
    """Commands that live in their own modules (each owned by its feature): a module exposes
    `register(app)` (top-level commands) or a Typer `app` mounted under its name. A module
    that fails to import fails the CLI loudly (never a silently missing command)."""
    from rhythm.cli import (
        agent,
        auth,
        config,
        daemon,
        demo,
        imports,
        insights,
        labels,
        mapping,
        mcp,
        plan,
        serve,
        sim,
        sync,
        train,
    )

    app.add_typer(imports.app, name="import")
    app.add_typer(auth.app, name="auth")
    app.add_typer(sim.app, name="sim")
    app.add_typer(train.app, name="train")
    app.add_typer(config.app, name="config")
    app.add_typer(plan.app, name="plan")
    app.add_typer(serve.app, name="serve")
    for mod in (sync, mapping, agent, daemon, demo, insights, mcp, labels):
        mod.register(app)


_mount()
