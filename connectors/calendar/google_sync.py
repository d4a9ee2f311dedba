"""`rhythm sync google`: Google Calendar API v3 from stored OAuth tokens.

``open_sync(ctx)`` lists the calendars and syncs each incrementally from its sync token
(a 410 starts that calendar over); refreshed access tokens are stored again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common.errors import AuthError, ConfigError
from connectors import google_http
from connectors.oauth import TokenStore
from connectors.registry import SyncContext


def client_config(setting: Callable[[str], Any]) -> tuple[str, str | None]:
    """(client_id, client_secret) from settings or the downloaded client_secrets JSON."""
    cid, secret = setting("google_client_id"), setting("google_client_secret")
    secrets_file = setting("google_client_secrets_file")
    if (not cid) and secrets_file:
        path = Path(secrets_file).expanduser()
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read the Google client secrets file ({exc})") from None
        block = doc.get("installed") or doc.get("web") or {}
        cid, secret = block.get("client_id"), block.get("client_secret")
    if not cid:
        raise ConfigError(
            "google: no OAuth client configured; set RHYTHM_GOOGLE_CLIENT_SECRETS_FILE to the "
            "Desktop-app client JSON (or RHYTHM_GOOGLE_CLIENT_ID/SECRET)"
        )
    return cid, secret


def credentials(setting: Callable[[str], Any], store: TokenStore, scopes: Sequence[str] | None = None) -> Any:
    """Credentials from the stored token; a refresh asks for ``scopes`` (default: the
    read-only scope of the sync; ``rhythm plan push google`` asks for the write scope too)."""
    from google.oauth2.credentials import Credentials

    from connectors.calendar.google_api import SCOPES

    tok = store.load("google")
    if not tok or not tok.get("access_token"):
        raise AuthError("google: not authorised yet; run `rhythm auth google`")
    cid, secret = client_config(setting)
    expiry = None
    if tok.get("expires_at"):
        # google-auth compares naive UTC datetimes
        expiry = datetime.fromtimestamp(float(tok["expires_at"]), tz=UTC).replace(tzinfo=None)
    return Credentials(
        token=tok["access_token"],
        refresh_token=tok.get("refresh_token"),
        token_uri=setting("google_token_url"),
        client_id=cid,
        client_secret=secret,
        scopes=list(scopes or SCOPES),
        expiry=expiry,
    )


def authorised(ctx: SyncContext) -> bool:
    return bool(ctx.tokens.load("google"))


def open_sync(ctx: SyncContext) -> tuple[Iterator[Any], Callable[[], None]]:
    from connectors.calendar import google_api

    store = ctx.tokens
    creds = credentials(ctx.setting, store)
    service = google_api.build_service(ctx.setting("google_api_base"), creds)
    persist_refreshed = google_http.token_saver(creds, store)

    client = google_api.GoogleCalendarClient(service, policy=ctx.policy, on_call=persist_refreshed)
    when = ctx.now or datetime.now(UTC)
    window = google_api.window_start_for(when, ctx.setting("google_window_past_days"))
    since = {k: v for k, v in ctx.cursors.items() if k != "calendarList"}
    return google_api.fetch(since, client, window_start=window, now=ctx.now), lambda: None
