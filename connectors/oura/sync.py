"""`rhythm sync oura`: the Oura API v2 streams opened from the stored token.

``open_sync(ctx)`` plans each stream's window from its cursor (the whole history,
``oura_history_days``, on the first sync; else the cursor minus ``oura_lag_days``), and
returns the records with a ``close()``; ``authorised(ctx)`` says whether a token is stored.

Two kinds of stored token (``rhythm auth oura``): an OAuth2 token, refreshed (and the
rotated refresh token stored first) when it expires or after a 401; or a personal access
token, which cannot be refreshed: a 401 asks for ``rhythm auth oura`` again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from common.errors import AuthError, ConfigError
from connectors.http import ApiClient, RetryPolicy
from connectors.oauth import OAuth2Session, TokenStore
from connectors.oura.api import fetch, plan
from connectors.registry import SyncContext

NAME = "oura"
PERSONAL = "personal"  # the `kind` of a stored personal access token


class PersonalToken:
    """A personal access token: used as it is, never refreshed."""

    def __init__(self, token: str):
        self._token = token

    def access_token(self) -> str:
        return self._token

    def refresh(self) -> str:
        raise AuthError(
            "oura: the personal access token was refused; run `rhythm auth oura` again "
            "(with a new token, or with OAuth)"
        )


def token_provider(
    setting: Callable[[str], Any], store: TokenStore, policy: RetryPolicy
) -> tuple[PersonalToken | OAuth2Session, ApiClient | None]:
    """The stored token as a provider for ApiClient, and the token endpoint's client (OAuth)."""
    tok = store.load(NAME)
    if not tok or not tok.get("access_token"):
        raise AuthError("oura: not authorised yet; run `rhythm auth oura`")
    if tok.get("kind") == PERSONAL:
        return PersonalToken(str(tok["access_token"])), None
    token_http = ApiClient(setting("oura_token_url"), name=NAME, policy=policy)
    session = OAuth2Session(
        name=NAME,
        store=store,
        token_url=setting("oura_token_url"),
        client_id=setting("oura_client_id"),
        client_secret=setting("oura_client_secret"),
        http=token_http,
    )
    return session, token_http


def fallback_zone(setting: Callable[[str], Any]) -> tzinfo | None:
    """The person's `timezone` setting, for heart rate Oura wrote no offset near."""
    name = setting("timezone")
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"timezone: unknown zone {name!r} (use an IANA name like Europe/Amsterdam)") from None


def authorised(ctx: SyncContext) -> bool:
    return bool(ctx.tokens.load(NAME))


def open_sync(ctx: SyncContext) -> tuple[Iterator[Any], Callable[[], None]]:
    now = ctx.now or datetime.now(UTC)
    windows = plan(
        ctx.cursors, now,
        history_days=int(ctx.setting("oura_history_days")),
        lag_days=int(ctx.setting("oura_lag_days")),
    )
    zone = fallback_zone(ctx.setting)
    provider, token_http = token_provider(ctx.setting, ctx.tokens, ctx.policy)
    client = ApiClient(ctx.setting("oura_api_base"), name=NAME, tokens=provider, policy=ctx.policy)

    def close() -> None:
        client.close()
        if token_http is not None:
            token_http.close()

    try:
        provider.access_token()  # fail early (and refresh now) if the stored token is unusable
    except BaseException:
        close()
        raise
    return fetch(windows, client, now=now, zone=zone), close
