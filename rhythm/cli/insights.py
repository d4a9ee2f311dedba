"""`rhythm insights`: which behaviours move which meters, for this person (read-only)."""

from __future__ import annotations

from datetime import date
from typing import Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from common.errors import ConfigError
from rhythm.cli._common import cell, console, get_settings, plain, print_json

FINDINGS_SHOWN = 25
FLOOR_SHOWN = 12
CLOSEST_SHOWN = 5


def _day(value: str | None) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"--since: expected a day as YYYY-MM-DD, got {value!r}") from None


def fmt_q(q: float | None) -> str:
    if q is None:
        return "-"
    return f"{q:.2g}" if q >= 0.001 else f"{q:.1e}"


def _more(more: dict[str, int] | None) -> str:
    if more is None:
        return "no effect seen: more days will not make one"
    w, wo = more["with"], more["without"]
    parts = [f"{w} with" if w else "", f"{wo} without" if wo else ""]
    parts = [p for p in parts if p]
    total = w + wo
    if not parts:
        return "none"
    return f"~{total} day{'s' if total != 1 else ''} ({', '.join(parts)})"


def _floor_text(n: int, word: str) -> str:
    return f"{n} more day{'s' if n != 1 else ''} {word} it"


def _table(*columns: str, title: str | None = None) -> Table:
    """A compact table (no vertical rules) that fits 80 columns."""
    table = Table(title=Text(title) if title else None, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


def _pair(d: dict[str, Any], when: str) -> Text:
    """'factor' over '-> meter, when' (data: never markup)."""
    return Text(f"{plain(d['factor'])}\n-> {plain(d['meter'])}, {when}")


def render(result: Any, since: date | None = None) -> None:
    from mapping.insights import MIN_DAYS, effect_text, format_effect, when_text

    if result.first_day is None:
        if since is not None:
            console.print(f"no days with meters on or after {since}", highlight=False)
        else:
            console.print("no meters yet: import data, then run `rhythm map`", highlight=False)
        return
    tested = len(result.tested)
    findings = result.findings
    console.print(
        f"Insights from {result.first_day} to {result.last_day} ({result.days} days): {tested:,} "
        f"comparison{'s' if tested != 1 else ''} tested, {len(findings)} finding"
        f"{'s' if len(findings) != 1 else ''} at q < {result.q_max:g}", highlight=False)
    if findings:
        table = _table("factor -> meter", "effect [95% interval]", "days", "q",
                       title="What moves your meters: days with the factor vs days without")
        for c in findings[:FINDINGS_SHOWN]:
            d = c.to_dict()
            table.add_row(_pair(d, when_text(c)), cell(effect_text(d)), cell(f"{d['n_with']} / {d['n_without']}"),
                          cell(fmt_q(d["q_value"])))
        console.print(table)
        if len(findings) > FINDINGS_SHOWN:
            console.print(f"... and {len(findings) - FINDINGS_SHOWN} more (--json lists them all)", highlight=False)
        console.print(Text(
            "Effect = mean with the factor - mean without it: meters in meter units (0-1, 0.5 = usual for you), "
            "sleep in minutes, HRV in ms, resting heart rate in bpm; days: with / without the factor. Correlation, not "
            "cause: days with a factor differ in other ways too (docs/insights.md).", style="dim"))
    else:
        console.print(f"No finding at q < {result.q_max:g} yet.", highlight=False)

    floor = result.below_floor()
    closest = result.closest(CLOSEST_SHOWN)
    if not floor and not closest:
        return
    console.print(Text("\nNot enough days yet", style="bold"))
    if floor:
        console.print(Text(f"Factors with fewer than {MIN_DAYS} days with or without them (not tested):"))
        table = _table("factor", "days with / without", "more needed")
        for f in floor[:FLOOR_SHOWN]:
            more = f["more_days_needed"]
            need = ", ".join(x for x in (_floor_text(more["with"], "with") if more["with"] else "",
                                         _floor_text(more["without"], "without") if more["without"] else "") if x)
            table.add_row(cell(f["factor"]), cell(f"{f['n_with']} / {f['n_without']}"), cell(need))
        console.print(table)
        if len(floor) > FLOOR_SHOWN:
            console.print(f"... and {len(floor) - FLOOR_SHOWN} more factors", highlight=False)
    if closest:
        console.print(Text("Closest to a finding (more days for an 80% chance to find the effect seen so far):"))
        table = _table("factor -> meter", "effect", "q", "more days needed")
        for c in closest:
            d = c.to_dict()
            table.add_row(_pair(d, when_text(c)), cell(format_effect(d["effect"], d["effect_unit"])),
                          cell(fmt_q(d["q_value"])), cell(_more(d["more_days_needed"])))
        console.print(table)


def register(app: typer.Typer) -> None:
    @app.command("insights")
    def insights_cmd(
        ctx: typer.Context,
        factor: list[str] = typer.Option(
            None, "--factor",
            help="A factor to test (repeatable; default: the built-in set), e.g. title:Choir, title:Choir@evening, "
                 "action:EXERCISE@evening, workout@evening, late-meeting, meetings:>=3h, sleep:<6h, bedtime:>=00:00; "
                 "'defaults' adds the built-in set.",
        ),
        since: str | None = typer.Option(None, "--since", help="Only days on or after this day (YYYY-MM-DD)."),
        max_q: float = typer.Option(0.1, "--max-q", help="Report comparisons with a q-value at or below this (default 0.1)."),
        all_: bool = typer.Option(False, "--all", help="With --json: every comparison of the run, not only the findings."),
        json_out: bool = typer.Option(False, "--json", help="Print the findings as JSON (a list of objects)."),
    ) -> None:
        """Which behaviours move which meters for you: days with a factor vs days without, with q-values."""
        from rhythm.insights import find_insights, run_insights

        settings = get_settings(ctx)
        if json_out:
            print_json(find_insights(settings, factor or None, _day(since), q_max=max_q, include_all=all_))
            return
        render(run_insights(settings, factor or None, _day(since), q_max=max_q), _day(since))

