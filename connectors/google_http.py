"""What the Google API clients share (Calendar read and write, Tasks): the HTTP status of a
googleapiclient error, which failures are transient (for ``connectors.http.with_retries``),
and a Resource built from the discovery document shipped with the library (no network).

Each client keeps its own test for a 403 that means "rate limited" (the reason words the
API puts in the error differ by endpoint) and its own error messages.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable
from typing import Any

from connectors.http import RetryPolicy, parse_retry_after, with_retries


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a googleapiclient ``HttpError`` (None for other errors)."""
    status = getattr(getattr(exc, "resp", None), "status", None)
    try:
        return int(status) if status is not None else None
    except (TypeError, ValueError):
        return None


def classify(exc: BaseException, rate_limited: Callable[[BaseException], bool]) -> tuple[str, float | None] | None:
    """``("rate", Retry-After seconds or None)`` for a 429 or a 403 ``rate_limited`` says is one,
    ``("server", None)`` for a 5xx, a dropped connection or a body cut mid-response, else None
    (not transient: the caller maps it to the project's errors)."""
    from googleapiclient.errors import HttpError

    if isinstance(exc, HttpError):
        status = http_status(exc)
        if status == 429 or (status == 403 and rate_limited(exc)):
            headers = getattr(exc, "resp", {}) or {}
            wait = parse_retry_after(headers.get("retry-after")) if hasattr(headers, "get") else None
            return ("rate", wait)
        if status is not None and status >= 500:
            return ("server", None)
        return None
    if isinstance(exc, ConnectionError | TimeoutError | OSError):
        return ("server", None)
    if isinstance(exc, http.client.HTTPException):  # IncompleteRead: a body cut mid-response
        return ("server", None)
    try:
        import httplib2

        if isinstance(exc, httplib2.HttpLib2Error):
            return ("server", None)
    except ImportError:  # pragma: no cover - httplib2 comes with googleapiclient
        pass
    return None


def build_service(name: str, version: str, api_base: str, credentials: Any) -> Any:
    """A googleapiclient Resource for API ``name`` ``version`` pointed at ``api_base`` (a
    setting: tests use a loopback URL; ``client_options.api_endpoint`` replaces the root URL
    and service path), from the shipped discovery document."""
    from googleapiclient.discovery import build

    return build(
        name,
        version,
        credentials=credentials,
        static_discovery=True,
        cache_discovery=False,
        client_options={"api_endpoint": api_base.rstrip("/") + "/"},
    )


def token_saver(creds: Any, store: Any) -> Callable[[], None]:
    """A callback that writes ``creds``' access token (and refresh token, expiry) back into
    ``store``'s ``google`` entry when google-auth has refreshed it since the last call: the
    clients' ``on_call``, so a refreshed token survives the process."""
    from datetime import UTC

    last = {"token": creds.token}

    def save() -> None:
        if creds.token and creds.token != last["token"]:
            stored = dict(store.load("google") or {})
            stored["access_token"] = creds.token
            if creds.refresh_token:
                stored["refresh_token"] = creds.refresh_token
            if creds.expiry is not None:
                stored["expires_at"] = creds.expiry.replace(tzinfo=UTC).timestamp()
            store.save("google", stored)
            last["token"] = creds.token

    return save


class GoogleClient:
    """A read client: every call through the project's retry policy (``classify``), failures
    as the project's errors (``raise_mapped``), ``on_call`` after every successful call (used
    to persist a refreshed access token). ``service`` is a googleapiclient Resource
    (``build_service``); tests may hand in any object with the same methods."""

    NAME = "google"  # the retry policy's name for this API (logs, messages)

    def __init__(self, service: Any, *, policy: RetryPolicy | None = None,
                 on_call: Callable[[], None] | None = None):
        self.service = service
        self.policy = policy or RetryPolicy()
        self.on_call = on_call
        self.requests_made = 0

    def classify(self, exc: BaseException) -> tuple[str, float | None] | None:
        return classify(exc, lambda e: False)

    def raise_mapped(self, exc: BaseException) -> None:
        """Raise the project's error for ``exc`` (or return: it is re-raised as it is)."""

    def _execute(self, request: Any) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            self.requests_made += 1
            return request.execute()

        try:
            body = with_retries(call, name=self.NAME, policy=self.policy, classify=self.classify)
        except Exception as exc:
            self.raise_mapped(exc)
            raise
        if self.on_call is not None:
            self.on_call()
        return body if isinstance(body, dict) else {}

