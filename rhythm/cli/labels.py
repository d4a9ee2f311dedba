"""`rhythm label`: a person's own labels for calendar titles, and the learned ones."""

from __future__ import annotations

import typer
from rich.markup import escape

from common.errors import ConfigError
from rhythm.cli._common import console, get_settings, print_json, rows_table


def register(app: typer.Typer) -> None:
    @app.command("label")
    def label_cmd(
        ctx: typer.Context,
        pattern: str | None = typer.Argument(None, help="A title (\"Chaostreff\") or a pattern with * (\"chaos*\")."),
        action: str | None = typer.Argument(None, help="One of the ten actions (EXERCISE, SOCIALIZE, ...) or NONE "
                                                       "(not an action)."),
        list_: bool = typer.Option(False, "--list", help="Show your labels and the learned ones with their evidence."),
        suggested: bool = typer.Option(False, "--suggested", help="Show only the learned and proposed labels."),
        remove: bool = typer.Option(False, "--remove", help="Remove your label for PATTERN."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Label a title once and it sticks: your label comes before the keyword table, for that
        title, its recurring series and titles sharing its distinctive words, and survives
        `rhythm map` and upgrades (it lives in your database)."""
        from rhythm import jobs

        settings = get_settings(ctx)
        if list_ or suggested or (pattern is None and not remove):
            rows = jobs.list_labels(settings)
            if suggested:
                rows = [r for r in rows if r["origin"] != "your label"]
            if json_out:
                print_json(rows)
            elif not rows:
                console.print("no labels yet: `rhythm label \"TITLE\" ACTION` (learned ones appear after `rhythm map`)",
                              highlight=False, soft_wrap=True)
            else:
                console.print(rows_table(["title or pattern", "action", "origin", "evidence"],
                                         [[escape(r["pattern"]), r["action"], r["origin"], escape(r["evidence"] or "")]
                                          for r in rows]))
            return
        if pattern is None:
            raise ConfigError("rhythm label --remove: name the title or pattern to remove")
        if remove:
            if action is not None:
                raise ConfigError("rhythm label --remove takes a title or pattern, not an action")
            result = jobs.remove_label(settings, pattern)
            if json_out:
                print_json(result)
            else:
                console.print(f"removed your label for {escape(pattern)!s}; history re-labelled", highlight=False, soft_wrap=True)
            return
        if action is None:
            raise ConfigError(f"rhythm label {pattern!r}: give an action too (one of the ten actions or NONE)")
        result = jobs.set_label(settings, pattern, action)
        if json_out:
            print_json(result)
            return
        verb = "replaced" if result["replaced"] else "stored"
        console.print(f"{verb}: {escape(result['pattern'])} -> {result['action']} (your label); "
                      f"{result['events_with_your_label']} events carry your labels now", highlight=False, soft_wrap=True)
