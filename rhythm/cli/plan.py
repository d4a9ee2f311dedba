"""`rhythm plan export --ics PATH` and `rhythm plan push google`: the plan in your calendar."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import typer

from rhythm.cli._common import console, get_settings, plain, print_json, rows_table

app = typer.Typer(
    help="Your plan in your calendar: an .ics file, or Rhythm's own blocks in Google Calendar.",
    no_args_is_help=True,
)
push_app = typer.Typer(
    help="Put the plan into a calendar service; only events Rhythm created are ever changed.",
    no_args_is_help=True,
)
app.add_typer(push_app, name="push")

DATE_HELP = "First local day (YYYY-MM-DD; default today)."
DAYS_HELP = "How many days from --date (1-14)."


def _day(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a date (YYYY-MM-DD)", param_hint="--date") from None


@app.command("export")
def export_cmd(
    ctx: typer.Context,
    ics: Path = typer.Option(..., "--ics", help="The .ics file to write: a new file, or one Rhythm wrote "
                             "before (replaced whole)."),
    day: str | None = typer.Option(None, "--date", help=DATE_HELP),
    days: int = typer.Option(1, "--days", help=DAYS_HELP),
    busy: bool = typer.Option(False, "--busy", help="Mark the blocks busy (TRANSP:OPAQUE) instead of free."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
    force: bool = typer.Option(False, "--force", help="Replace a regular file Rhythm did not write "
                               "(never a link, a pipe or a device)."),
) -> None:
    """Write the day's suggested blocks as .ics events with stable UIDs (re-export updates).

    A day with no stored plan is planned first. The blocks are marked as Rhythm's, so
    importing the file back never turns them into commitments."""
    from rhythm.jobs import recommend
    from rhythm.plan_export import export_ics

    result = export_ics(get_settings(ctx), ics, _day(day), days, plan=recommend, busy=busy, force=force)
    if json_out:
        print_json(result)
        return
    if result["planned"]:
        console.print(f"planned {', '.join(result['planned'])} first", highlight=False)
    rows = [(e["start"][:10], f"{e['start'][11:16]}-{e['end'][11:16]}", plain(e["summary"]), e["uid"])
            for e in result["events"]]
    console.print(rows_table(["day", "time", "block", "uid"], rows))
    n = len(result["events"])
    console.print(f"wrote {n} block{'s' if n != 1 else ''} ({'busy' if result['busy'] else 'free'}) to "
                  f"{result['path']}", highlight=False)


@push_app.command("google")
def push_google_cmd(
    ctx: typer.Context,
    calendar: str | None = typer.Option(None, "--calendar", help="Google calendar id (default: the push_calendar_id setting, primary)."),
    day: str | None = typer.Option(None, "--date", help=DATE_HELP),
    days: int = typer.Option(1, "--days", help=DAYS_HELP),
    busy: bool | None = typer.Option(None, "--busy/--free", help="Show the blocks as busy (opaque) or free (default: the push_busy setting, free)."),
    clear: bool = typer.Option(False, "--clear", help="Remove Rhythm's blocks of those days instead (nothing else is touched)."),
    json_out: bool = typer.Option(False, "--json", help="Print what was done as JSON."),
) -> None:
    """Insert or update the plan's blocks in Google Calendar; remove Rhythm's stale ones.

    Events Rhythm did not create are never changed. Needs `rhythm auth google --write`."""
    from rhythm.jobs import push_google

    result = push_google(get_settings(ctx), _day(day), days, calendar_id=calendar, busy=busy, clear=clear)
    if json_out:
        print_json(result)
        return
    if result["planned"]:
        console.print(f"planned {', '.join(result['planned'])} first", highlight=False)
    rows = [(key, change) for change in ("inserted", "updated", "unchanged", "deleted", "kept")
            for key in result[change]]
    if rows:
        console.print(rows_table(["block", "change"], rows))
    console.print(
        f"google calendar {plain(result['calendar_id'])}, {', '.join(result['days'])}: "
        f"{len(result['inserted'])} added, {len(result['updated'])} updated, {len(result['unchanged'])} unchanged, "
        f"{len(result['deleted'])} removed" + (f", {len(result['kept'])} kept (already over)" if result["kept"] else ""),
        highlight=False,
    )
