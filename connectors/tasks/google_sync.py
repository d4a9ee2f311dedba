"""`rhythm sync google_tasks`: Google Tasks API v1 with the Google authorisation of `rhythm
auth google` (which asks for the tasks read-only scope once ``google_tasks = true``).

The access token is always refreshed first, without narrowing its scopes: a token refreshed by
another Google sync for its own scopes alone may not cover Tasks. The new token is stored
again, so the other syncs use it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from common.errors import AuthError
from connectors import google_http
from connectors.registry import SyncContext
from connectors.tasks import google_api
from connectors.tasks.completions import person_zone


def authorised(ctx: SyncContext) -> bool:
    """Synced with the others once Google is authorised and ``google_tasks`` is on."""
    return bool(ctx.setting("google_tasks")) and bool(ctx.tokens.load("google"))


def _granted(tok: dict[str, Any]) -> set[str] | None:
    scope = tok.get("scope")
    if isinstance(scope, str) and scope.strip():
        return set(scope.split())
    if isinstance(scope, list):
        return {str(s) for s in scope}
    return None  # the token endpoint did not say: let the API decide


def credentials(ctx: SyncContext) -> Any:
    """Google credentials from the stored token, refreshed on first use for every scope the
    person granted (``scopes=None``: the refresh asks for no narrower set)."""
    from google.oauth2.credentials import Credentials

    from connectors.calendar.google_sync import credentials as google_credentials

    base = google_credentials(ctx.setting, ctx.tokens)  # checks the token and the OAuth client
    granted = _granted(ctx.tokens.load("google") or {})
    if granted is not None and not granted & {google_api.SCOPE, google_api.FULL_SCOPE}:
        raise AuthError(
            f"{google_api.SYNC}: the Google authorisation does not include Google Tasks; set "
            "`google_tasks = true` (rhythm config set google_tasks true) and run `rhythm auth "
            "google` again"
        )
    return Credentials(
        token=None if base.refresh_token else base.token,
        refresh_token=base.refresh_token,
        token_uri=base.token_uri,
        client_id=base.client_id,
        client_secret=base.client_secret,
        scopes=None,
    )


def open_sync(ctx: SyncContext) -> tuple[Iterator[Any], Callable[[], None]]:
    store = ctx.tokens
    creds = credentials(ctx)
    service = google_api.build_service(ctx.setting("google_tasks_api_base"), creds)
    persist_refreshed = google_http.token_saver(creds, store)

    client = google_api.GoogleTasksClient(service, policy=ctx.policy, on_call=persist_refreshed)
    zone = person_zone(ctx.setting("timezone"))
    records = google_api.fetch(ctx.cursors, client, zone=zone, now=ctx.now)
    return records, lambda: None
