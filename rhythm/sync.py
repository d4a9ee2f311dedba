"""API sources and OAuth: what `rhythm sync` opens and `rhythm auth` stores.

Each API source is a descriptor (connectors.registry.ApiSync) whose opener lives in its
connector folder; ``open_source`` hands it a ``SyncContext`` of plain values (settings by
name, the token store, the retry policy, the stream cursors). The unit of work itself (the
lock, one transaction per source, cursors moved with the data, the `runs` row) is
``rhythm.jobs.sync``.

Tokens never reach `runs`, `sync_state`, error lines or logs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common.errors import AuthError, ConfigError
from connectors import registry
from connectors.calendar.google_sync import client_config
from connectors.calendar.google_write import can_write as google_can_write
from connectors.garmin.sync import token_dir
from connectors.http import ApiClient, RetryPolicy
from connectors.oauth import (
    TokenStore,
    authorization_url,
    authorize_via_loopback,
    exchange_code,
    token_store,
)
from rhythm.settings import Settings

WHOOP_REDIRECT_PORT = 8765  # must match the redirect URL registered with the WHOOP app

# source, records written so far
SyncProgress = Callable[[str, int], None]


def default_policy() -> RetryPolicy:
    """The retry policy of real syncs (tests replace this function)."""
    return RetryPolicy()


def tokens(settings: Settings) -> TokenStore:
    return token_store(settings.tokens_dir, settings.token_backend)


def garmin_token_dir(settings: Settings) -> Path:
    return token_dir(settings.tokens_dir)


def sync_context(
    settings: Settings,
    cursors: Mapping[str, str | None] | None = None,
    policy: RetryPolicy | None = None,
    now: datetime | None = None,
) -> registry.SyncContext:
    return registry.SyncContext(
        setting=settings.get,
        tokens=tokens(settings),
        tokens_dir=settings.tokens_dir,
        policy=policy or default_policy(),
        cursors=dict(cursors or {}),
        now=now,
    )


def sync_names() -> list[str]:
    """Every API source `rhythm sync` knows, in sync order."""
    return list(registry.api_syncs())


def configured_sources(settings: Settings) -> list[str]:
    """Sources with stored credentials, in the order they sync."""
    ctx = sync_context(settings)
    return [name for name, d in registry.api_syncs().items() if registry.resolve(d.authorised)(ctx)]


def open_source(
    settings: Settings,
    name: str,
    cursors: Mapping[str, str | None],
    policy: RetryPolicy,
    now: datetime | None,
) -> tuple[Iterator[Any], Callable[[], None]]:
    """The records of one API source from its cursors, and a close() for its clients."""
    desc = registry.api_sync(name)
    return registry.resolve(desc.opener)(sync_context(settings, cursors, policy, now))


# -- auth ---------------------------------------------------------------------------------
def auth_whoop(
    settings: Settings,
    open_browser: bool = True,
    on_url: Callable[[str], None] | None = None,
    *,
    port: int = WHOOP_REDIRECT_PORT,
    timeout_s: float = 300.0,
    policy: RetryPolicy | None = None,
) -> dict[str, Any]:
    """Authorisation-code flow with a loopback redirect; stores the tokens (0600)."""
    from connectors.whoop.api import SCOPES

    if not settings.whoop_client_id or not settings.whoop_client_secret:
        raise ConfigError(
            "whoop: set RHYTHM_WHOOP_CLIENT_ID and RHYTHM_WHOOP_CLIENT_SECRET (from the WHOOP "
            "Developer Dashboard) first"
        )

    def build(redirect_uri: str, state: str) -> str:
        return authorization_url(
            settings.whoop_auth_url,
            {
                "response_type": "code",
                "client_id": settings.whoop_client_id or "",
                "redirect_uri": redirect_uri,
                "scope": " ".join(SCOPES),
                "state": state,
            },
        )

    redirect = authorize_via_loopback(
        build, name="whoop", on_url=on_url, open_browser=open_browser, port=port,
        redirect_host="localhost", timeout_s=timeout_s,
    )
    with ApiClient(settings.whoop_token_url, name="whoop", policy=policy or default_policy()) as http:
        tok = exchange_code(
            http, name="whoop", token_url=settings.whoop_token_url,
            client_id=settings.whoop_client_id, client_secret=settings.whoop_client_secret,
            code=redirect.code, redirect_uri=redirect.redirect_uri,
        )
    if not tok.get("refresh_token"):
        raise AuthError("whoop: no refresh token came back (the `offline` scope was not granted)")
    tokens(settings).save("whoop", tok)
    return _auth_summary("whoop", tok, settings)


def auth_google(
    settings: Settings,
    open_browser: bool = True,
    on_url: Callable[[str], None] | None = None,
    *,
    port: int = 0,
    timeout_s: float = 300.0,
    policy: RetryPolicy | None = None,
    write: bool | None = None,
) -> dict[str, Any]:
    """Installed-app flow: loopback redirect on 127.0.0.1, PKCE, the read-only calendar scope;
    with ``write`` (default: the ``google_write`` setting) also ``calendar.events``, which
    `rhythm plan push google` needs to add, change and remove its own blocks; with the
    ``google_tasks`` setting also read-only Google Tasks."""
    from google_auth_oauthlib.flow import Flow

    from connectors.calendar.google_api import SCOPES
    from connectors.calendar.google_write import WRITE_SCOPES

    if write is None:
        write = bool(settings.google_write)
    scopes = list(WRITE_SCOPES if write else SCOPES)
    cid, secret = client_config(settings.get)
    if settings.get("google_tasks"):  # Google Tasks as progress evidence (connectors/tasks)
        from connectors.tasks.google_api import SCOPE as TASKS_SCOPE

        scopes.append(TASKS_SCOPE)
    config = {
        "installed": {
            "client_id": cid,
            "client_secret": secret,
            "auth_uri": settings.google_auth_url,
            "token_uri": settings.google_token_url,
            "redirect_uris": ["http://127.0.0.1"],
        }
    }
    flows: dict[str, Any] = {}

    def build(redirect_uri: str, state: str) -> str:
        flow = Flow.from_client_config(config, scopes=list(scopes), state=state, redirect_uri=redirect_uri)
        url, _ = flow.authorization_url(prompt="consent", include_granted_scopes="true")
        flows["flow"] = flow
        return url

    redirect = authorize_via_loopback(
        build, name="google", on_url=on_url, open_browser=open_browser, port=port,
        timeout_s=timeout_s,
    )
    with ApiClient(settings.google_token_url, name="google", policy=policy or default_policy()) as http:
        tok = exchange_code(
            http, name="google", token_url=settings.google_token_url, client_id=cid,
            client_secret=secret, code=redirect.code, redirect_uri=redirect.redirect_uri,
            code_verifier=flows["flow"].code_verifier,
        )
    if not tok.get("scope"):  # the token endpoint may leave out the scopes when all were granted
        tok["scope"] = " ".join(scopes)
    tokens(settings).save("google", tok)
    summary = _auth_summary("google", tok, settings)
    summary["write"] = bool(google_can_write(tok.get("scope")))
    if write and not summary["write"]:
        raise AuthError("google: write access was not granted (“View and edit events on all your calendars” "
                        "was left unticked); Rhythm can still read; run `rhythm auth google --write` to allow it")
    return summary


def auth_oura(
    settings: Settings,
    token: str | None = None,
    *,
    open_browser: bool = True,
    on_url: Callable[[str], None] | None = None,
    port: int | None = None,
    timeout_s: float = 300.0,
    policy: RetryPolicy | None = None,
) -> dict[str, Any]:
    """A personal access token (checked with Oura, then stored 0600); without one, OAuth2:
    authorisation code with PKCE on a loopback redirect, tokens stored for refresh."""
    from connectors.oura import auth

    policy = policy or default_policy()
    if token is not None:
        tok = auth.personal_token(token)
        auth.check_token(settings.get("oura_api_base"), tok["access_token"], policy)
        tokens(settings).save("oura", tok)
        return {**_auth_summary("oura", tok, settings), "kind": "personal access token"}
    cid, secret = settings.get("oura_client_id"), settings.get("oura_client_secret")
    if not cid or not secret:
        raise ConfigError(
            "oura: set RHYTHM_OURA_CLIENT_ID and RHYTHM_OURA_CLIENT_SECRET (from your Oura API "
            "application) first, or give a personal access token"
        )
    verifier, challenge = auth.pkce_pair()
    redirect = authorize_via_loopback(
        lambda uri, state: auth.auth_url(settings.get("oura_auth_url"), cid, uri, state, challenge),
        name="oura", on_url=on_url, open_browser=open_browser, redirect_host="localhost",
        port=settings.get("oura_redirect_port") if port is None else port, timeout_s=timeout_s,
    )
    with ApiClient(settings.get("oura_token_url"), name="oura", policy=policy) as http:
        tok = auth.exchange(
            http, token_url=settings.get("oura_token_url"), client_id=cid, client_secret=secret,
            code=redirect.code, redirect_uri=redirect.redirect_uri, verifier=verifier,
        )
    tokens(settings).save("oura", tok)
    return {**_auth_summary("oura", tok, settings), "kind": "oauth"}


def auth_garmin(
    settings: Settings, email: str, password: str, prompt_mfa: Callable[[], str] | None = None
) -> dict[str, Any]:
    from connectors.garmin import live

    live.login(garmin_token_dir(settings), email, password, prompt_mfa)
    return {"provider": "garmin", "stored": str(garmin_token_dir(settings))}


def _auth_summary(provider: str, tok: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """What the CLI may show: never the tokens themselves."""
    exp = tok.get("expires_at")
    return {
        "provider": provider,
        "scope": tok.get("scope"),
        "refresh_token": bool(tok.get("refresh_token")),
        "expires_at": datetime.fromtimestamp(float(exp), tz=UTC).isoformat() if exp else None,
        "stored": str(settings.tokens_dir / f"{provider}.json"),
    }

