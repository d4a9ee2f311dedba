"""`rhythm sync whoop`: the WHOOP API v2 stream opened from stored OAuth tokens.

``open_sync(ctx)`` returns the records of every stream from its cursor minus the lag
window (``whoop_lag_days``), and a ``close()``; ``authorised(ctx)`` says whether tokens are
stored. The token is refreshed (and stored again) when it has expired.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from connectors.http import ApiClient, RetryPolicy
from connectors.oauth import OAuth2Session, TokenStore
from connectors.registry import SyncContext
from connectors.whoop.api import STREAMS, fetch, parse_ts


def whoop_session(setting: Callable[[str], Any], store: TokenStore, policy: RetryPolicy) -> tuple[OAuth2Session, ApiClient]:
    token_http = ApiClient(setting("whoop_token_url"), name="whoop", policy=policy)
    session = OAuth2Session(
        name="whoop",
        store=store,
        token_url=setting("whoop_token_url"),
        client_id=setting("whoop_client_id"),
        client_secret=setting("whoop_client_secret"),
        http=token_http,
        scope="offline",
    )
    return session, token_http


def whoop_since(cursors: Mapping[str, str | None], lag_days: int) -> dict[str, datetime | None]:
    """Each stream's start: its cursor minus the lag window (None: the whole history)."""
    since: dict[str, datetime | None] = {}
    for stream in STREAMS:
        ts = parse_ts(cursors.get(stream))
        since[stream] = None if ts is None else ts - timedelta(days=lag_days)
    return since


def authorised(ctx: SyncContext) -> bool:
    return bool(ctx.tokens.load("whoop"))


def open_sync(ctx: SyncContext) -> tuple[Iterator[Any], Callable[[], None]]:
    session, token_http = whoop_session(ctx.setting, ctx.tokens, ctx.policy)
    client = ApiClient(ctx.setting("whoop_api_base"), name="whoop", tokens=session, policy=ctx.policy)

    def close() -> None:
        client.close()
        token_http.close()

    try:
        session.access_token()  # fail early (and refresh now) if the stored token is unusable
    except BaseException:
        close()
        raise
    return fetch(whoop_since(ctx.cursors, ctx.setting("whoop_lag_days")), client, now=ctx.now), close
