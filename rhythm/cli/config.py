"""`rhythm config show` and `rhythm config set KEY VALUE`: settings without editing TOML by hand."""

from __future__ import annotations

import typer

from rhythm.cli._common import console, get_settings, print_json, rows_table
from rhythm.settings import set_config

app = typer.Typer(help="Show or change settings (RHYTHM_HOME/config.toml).", no_args_is_help=True)


@app.command("show")
def show_cmd(ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every setting with its value and where it comes from (default, config, env, flag); secrets masked."""
    s = get_settings(ctx)
    values = s.public()
    rows = [(name, "" if v is None else v, s.origins.get(name, "default")) for name, v in values.items()]
    if json_out:
        print_json({name: {"value": v, "from": origin} for name, v, origin in rows})
        return
    console.print(rows_table(["setting", "value", "from"], rows, title=str(s.config_file)))
    console.print("[dim]change one with: rhythm config set KEY VALUE (environment variables RHYTHM_<KEY> "
                  "override the file)[/dim]", highlight=False)


@app.command("set")
def set_cmd(
    ctx: typer.Context,
    key: str = typer.Argument(..., help="Setting name, as `rhythm config show` lists it (e.g. timezone)."),
    value: str = typer.Argument(..., help="The new value (checked before it is written)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Write one setting into config.toml (its own [section] where the file has one)."""
    result = set_config(get_settings(ctx), key.strip().lower(), value)
    if json_out:
        print_json(result)
        return
    console.print(f"{result['setting']} = {result['value']!r} written to {result['file']}", highlight=False)


@app.command("unset")
def unset_cmd(
    ctx: typer.Context,
    key: str = typer.Argument(..., help="Setting name to remove from config.toml (back to its default)."),
) -> None:
    """Remove one setting from config.toml."""
    result = set_config(get_settings(ctx), key.strip().lower(), None)
    console.print(f"{result['setting']} removed from {result['file']}", highlight=False)
