"""`rhythm map` (rebuild meters and slot actions) and `rhythm meters` (show them, plot them)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from common.errors import ConfigError
from common.records import METERS
from rhythm.cli._common import console, get_settings, print_json, rows_table


def _day(value: str | None, flag: str) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{flag}: expected a day as YYYY-MM-DD, got {value!r}") from None


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def register(app: typer.Typer) -> None:
    @app.command("map")
    def map_cmd(
        ctx: typer.Context,
        since: str | None = typer.Option(None, "--since", help="Rebuild only days on or after this day (YYYY-MM-DD)."),
        json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    ) -> None:
        """Rebuild meters and slot actions from stored data (no network)."""
        from rhythm.jobs import map_data

        settings = get_settings(ctx)
        summary = map_data(settings, _day(since, "--since"))
        if json_out:
            print_json(summary)
            return
        span = f"{summary.get('first_day')} .. {summary.get('last_day')}" if summary.get("first_day") else "no data"
        console.print(f"mapped days {span}: {summary.get('slots_with_meters', 0)} of {summary.get('slots', 0)} "
                      f"slots with meters (mean confidence {summary.get('mean_confidence', 0):.2f}), "
                      f"{summary.get('slots_with_action', 0)} with an action, "
                      f"{summary.get('events_classified', 0)} events classified", highlight=False)
        if summary.get("labels_yours") or summary.get("labels_learned") or summary.get("learned_proposed"):
            console.print(f"labels: {summary.get('labels_yours', 0)} events by your labels, "
                          f"{summary.get('labels_learned', 0)} by labels learned from your devices "
                          f"({summary.get('learned_applied', 0)} applied, {summary.get('learned_proposed', 0)} "
                          "proposed: `rhythm label --suggested`)", highlight=False, soft_wrap=True)
        ans = summary.get("answers")
        if ans and (ans.get("judged") or ans.get("unknown")):
            console.print(f"answers from your data: {ans['accepted']} done, {ans['ignored']} not done, "
                          f"{ans['unknown']} unknown (`rhythm feedback --review`)", highlight=False)
        if summary.get("actions"):
            console.print(rows_table(["action", "slots"], sorted(summary["actions"].items())))

    @app.command("meters")
    def meters_cmd(
        ctx: typer.Context,
        day: str | None = typer.Option(None, "--day", help="Last day to show (YYYY-MM-DD; default: the latest mapped day)."),
        days: int = typer.Option(1, "--days", min=1, help="How many days to show, ending at --day."),
        plot: str | None = typer.Option(
            None, "--plot", help="Write the meter history as a PNG to this path ('default': RHYTHM_HOME/plots/meters.png)."
        ),
        explain: bool = typer.Option(False, "--explain", help="Show the signals behind each meter."),
        json_out: bool = typer.Option(False, "--json", help="Print the rows, evidence included, as JSON."),
        fit: bool = typer.Option(
            False, "--fit", help="Show your own dynamics fitted from your history: each action's effect with "
            "its sd, and how well it predicts held-out days."
        ),
    ) -> None:
        """Show the meters per slot with the action and the evidence behind them; optionally plot them."""
        if fit:
            _show_fit(ctx, _day(day, "--day"), json_out)
            return
        from mapping.explain import signal_lines
        from mapping.plot import plot_meters
        from storage import open_db
        from storage.derived import history_rows, meter_rows

        settings = get_settings(ctx)
        end = _day(day, "--day")
        with open_db(settings.database, read_only=True) as db:
            rows = meter_rows(db, end, days)
            hist = history_rows(db, end, max(days, 90)) if plot else []
        written = None
        if plot:
            target = settings.home / "plots" / "meters.png" if plot == "default" else Path(plot).expanduser()
            written = plot_meters(hist, target) if hist else None
        if json_out:
            print_json({"rows": rows, "plot": str(written) if written else None})
            return
        if not rows:
            console.print("no meters yet: import data, then run `rhythm map`")
        for d in sorted({r["local_day"] for r in rows}):
            table = Table(title=f"meters on {d} (0.5 = usual for you)")
            for col in ("slot", *METERS, "confidence", "action"):
                table.add_column(col)
            for r in (x for x in rows if x["local_day"] == d):
                act = "-" if not r["action"] else f"{r['action']} ({r['action_confidence']:.2f})"
                table.add_row(r["slot"], *(_fmt(r[m]) for m in METERS), _fmt(r["confidence"]), act)
            console.print(table)
            if explain:
                for r in (x for x in rows if x["local_day"] == d):
                    console.print(f"[bold]{r['slot']}[/bold]")
                    for m in METERS:
                        lines = signal_lines(r["evidence"], m)
                        console.print(f"  {m}: " + ("; ".join(escape(x) for x in lines) or "no signals"),
                                      highlight=False)
                    rule = r["action_evidence"].get("rule", "none")
                    source = r["action_evidence"].get("source")  # "your label", "learned from your devices"
                    rule += f", {source}" if source else ""
                    console.print(f"  action: {r['action'] or '-'} (rule: {rule})", highlight=False)
        if plot:
            console.print(f"plot written to {written}" if written else "nothing to plot yet", highlight=False)


def _show_fit(ctx: typer.Context, end: date | None, json_out: bool) -> None:
    """`rhythm meters --fit`: the person's fitted dynamics (rhythm.personal.fit_report)."""
    from rhythm.personal import fit_report
    from storage import open_db

    settings = get_settings(ctx)
    with open_db(settings.database, read_only=True) as db:
        report = fit_report(db, end)
    if json_out:
        print_json(report)
        return
    if not report["fitted"]:
        console.print(f"too little history to fit your dynamics: {report['transitions']} slot-to-slot steps "
                      f"(need {report['min_transitions']}); the plan uses the simulator's table "
                      "(import more days, then `rhythm map`)", highlight=False)
        return
    console.print(f"your dynamics from {report['transitions']} slot-to-slot steps, {report['first_day']} .. "
                  f"{report['last_day']} (0.5 = usual; the table's relative effects scaled by {report['kappa']:g})",
                  highlight=False)
    console.print("each action's effect, its own slot plus the next morning (±sd; * departs from the table, "
                  "whose values follow in brackets):", highlight=False)
    lines = [f"{'action':<12}{'times':<8}" + "".join(f"{m:<12}" for m in METERS)]
    for e in report["effects"]:
        cells = [f"{e['effect'][m]:+.2f}±{e['sd'][m]:.2f}{'*' if m in e['departs'] else ''}" for m in METERS]
        lines.append(f"{e['action']:<12}{e['steps']}+{e['mornings_after']:<{7 - len(str(e['steps']))}}"
                     + "".join(f"{c:<12}" for c in cells))
        lines.append(" " * 20 + "".join(f"{'(' + format(e['table'][m], '+.2f') + ')':<12}" for m in METERS))
    console.print("\n".join(x.rstrip() for x in lines), highlight=False, markup=False, soft_wrap=True)
    pull = report["pull_to_usual"]["morning"]
    console.print("overnight pull back to your usual: " + ", ".join(f"{m} {pull[m]:+.2f}" for m in METERS),
                  highlight=False)
    h = report["heldout"]
    if h["test_steps"]:
        mae = h["mae"]
        ht = Table(title=f"one-step prediction on held-out days from {h['test_from']} "
                   f"({h['test_steps']} steps, fitted on {h['train_steps']} before)")
        for col in ("predictor", "mean abs error"):
            ht.add_column(col)
        for name, label in (("no_change", "no change"), ("simulator", "simulator's dynamics"),
                            ("fitted", "your fitted dynamics")):
            ht.add_row(label, "-" if mae[name] is None else f"{mae[name]:.4f}")
        console.print(ht)
