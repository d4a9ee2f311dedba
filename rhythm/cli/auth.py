"""`rhythm auth whoop|google|garmin|oura`: authorise Rhythm once; tokens are stored (0600)."""

from __future__ import annotations

import typer

from rhythm.cli._common import console, get_settings, print_json

app = typer.Typer(help="Authorise API access (OAuth with a local redirect); tokens stay on this machine.", no_args_is_help=True)


def _show_url(url: str) -> None:
    console.print("Open this address in a browser to authorise Rhythm:", highlight=False)
    console.print(url, highlight=False, soft_wrap=True)
    console.print("Waiting for the redirect ...", highlight=False)


def _secret(prompt: str, what: str) -> str:
    """A secret from the terminal (a hidden prompt), or, when standard input is not a terminal
    (a pipe from a script or a password manager), its first line: no prompt, no getpass
    warning, never echoed or printed."""
    import sys

    if sys.stdin is not None and not sys.stdin.isatty():
        from common.errors import AuthError

        line = sys.stdin.readline().strip()
        if not line:
            raise AuthError(f"{what}: nothing on standard input (pipe the token in, or run this in a terminal)")
        return line
    return typer.prompt(prompt, hide_input=True)


def _done(result: dict, json_out: bool) -> None:
    if json_out:
        print_json(result)
        return
    console.print(f"{result['provider']}: authorised; tokens stored in {result['stored']}", highlight=False,
                  soft_wrap=True)
    if result.get("write"):
        console.print("write access: Rhythm may add, change and remove its own blocks (`rhythm plan push google`)",
                      highlight=False)
    if result.get("expires_at"):
        refresh = "with" if result.get("refresh_token") else "WITHOUT"
        console.print(f"access token valid until {result['expires_at']} ({refresh} a refresh token)", highlight=False)


@app.command("whoop")
def whoop(
    ctx: typer.Context,
    no_browser: bool = typer.Option(False, "--no-browser", help="Only print the URL; do not open a browser."),
    port: int | None = typer.Option(None, "--port", help="Local redirect port (default: the whoop_redirect_port setting, 8765; must match the redirect URL registered with your WHOOP app: http://localhost:PORT/callback)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """WHOOP API v2 (scopes incl. offline, so Rhythm can refresh on its own)."""
    settings = get_settings(ctx)
    from rhythm.sync import auth_whoop

    _done(auth_whoop(settings, open_browser=not no_browser, on_url=_show_url, port=port or settings.whoop_redirect_port), json_out)


@app.command("google")
def google(
    ctx: typer.Context,
    no_browser: bool = typer.Option(False, "--no-browser", help="Only print the URL; do not open a browser."),
    write: bool = typer.Option(False, "--write", help="Also let Rhythm add, change and remove its own blocks (`rhythm plan push google`; scope calendar.events). Default: the google_write setting."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Google Calendar (read-only; with --write also its own events), installed-app flow with a 127.0.0.1 redirect."""
    from rhythm.sync import auth_google

    _done(auth_google(get_settings(ctx), open_browser=not no_browser, on_url=_show_url, write=write or None), json_out)


@app.command("garmin")
def garmin(
    ctx: typer.Context,
    email: str = typer.Option(..., "--email", prompt=True, help="Garmin Connect e-mail."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Garmin Connect (optional extra rhythm[garmin]); logs in once, keeps the tokens.

    The password is read from RHYTHM_GARMIN_PASSWORD or asked for (hidden), never from the
    command line (where other users could see it in the process list), and never stored."""
    import os

    from rhythm.sync import auth_garmin

    password = os.environ.get("RHYTHM_GARMIN_PASSWORD") or _secret("Garmin Connect password", "garmin")

    result = auth_garmin(get_settings(ctx), email, password, prompt_mfa=lambda: typer.prompt("MFA code"))
    if json_out:
        print_json(result)
    else:
        console.print(f"garmin: logged in; tokens stored in {result['stored']}", highlight=False)


@app.command("oura")
def oura(
    ctx: typer.Context,
    use_oauth: bool = typer.Option(False, "--oauth", help="OAuth2 in the browser (needs oura_client_id and oura_client_secret); the default when a client id is set."),
    use_token: bool = typer.Option(False, "--token", help="A personal access token: from RHYTHM_OURA_TOKEN, else asked for (hidden)."),
    no_browser: bool = typer.Option(False, "--no-browser", help="OAuth: only print the URL; do not open a browser."),
    port: int | None = typer.Option(None, "--port", help="OAuth: local redirect port (default: the oura_redirect_port setting, 8766; must match the redirect URI registered with your Oura app: http://localhost:PORT/callback)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Oura API v2: a personal access token, or OAuth2 (PKCE, refreshed on its own).

    A token comes from RHYTHM_OURA_TOKEN, a pipe (`echo TOKEN | rhythm auth oura --token`: its first
    line) or a hidden prompt (never the command line), is checked with Oura, stored 0600 and never
    printed; every outcome is one line."""
    import os

    from rhythm.sync import auth_oura

    settings = get_settings(ctx)
    env_token = os.environ.get("RHYTHM_OURA_TOKEN")
    oauth = use_oauth or (not use_token and not env_token and bool(settings.get("oura_client_id")))
    if oauth:
        result = auth_oura(settings, open_browser=not no_browser, on_url=_show_url, port=port)
    else:
        token = env_token or _secret("Oura personal access token", "oura")
        result = auth_oura(settings, token)
    _done(result, json_out)
