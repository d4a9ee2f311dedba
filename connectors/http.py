"""A small JSON-over-HTTPS client with bounded, polite retries, shared by the API connectors.

- 429: wait what `Retry-After` says (seconds or an HTTP date), capped at `max_retry_after`;
  without the header, exponential backoff. `X-RateLimit-Reset` (WHOOP) counts as well.
- 5xx and connection errors (a body cut mid-response included): exponential backoff with
  full jitter, at most `max_retries` retries; then `ApiError` (or `RateLimited` for a 429
  storm) with a one-line message that says which ("could not connect", "timed out",
  "connection dropped mid-response").
- 401: the token provider refreshes once, then the request is repeated; a second 401 is an
  `AuthError`.
- An empty body (204, or 200 with no bytes) is `None`: "no data", not an error.

Nothing here logs or repeats a token: messages carry the method, the path (no query) and
the status only. `sleep` is injectable so tests run instantly.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import httpx

from common.errors import ApiError, AuthError, RateLimited

T = TypeVar("T")

RETRY_STATUSES = frozenset({500, 502, 503, 504})


class TokenProvider(Protocol):
    def access_token(self) -> str: ...

    def refresh(self) -> str: ...


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. Defaults suit a person's sync; tests pass a zero-wait sleep."""

    max_retries: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    max_retry_after_s: float = 300.0
    jitter: bool = True
    sleep: Callable[[float], None] = time.sleep

    def backoff(self, attempt: int) -> float:
        """Wait before retry number `attempt` (1-based): full jitter over an exponential cap."""
        cap = min(self.backoff_max_s, self.backoff_base_s * (2 ** (attempt - 1)))
        return random.uniform(0, cap) if self.jitter else cap


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header: delta-seconds or an HTTP date."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return max(0.0, (when - now).total_seconds())


def _rate_limit_wait(resp: httpx.Response) -> float | None:
    wait = parse_retry_after(resp.headers.get("Retry-After"))
    if wait is None:
        reset = resp.headers.get("X-RateLimit-Reset")
        try:
            wait = float(reset) if reset is not None else None
        except ValueError:
            wait = None
    return wait


def transport_problem(exc: httpx.TransportError) -> str:
    """What went wrong on the wire, in words: a body cut short after the headers came (the
    server or a proxy closed the connection mid-response) is told apart from a connection
    that never gave an answer."""
    text = str(exc)
    if isinstance(exc, httpx.RemoteProtocolError) and (
        "complete message body" in text or "incomplete chunked read" in text.lower()
    ):
        return "connection dropped mid-response"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    return f"could not connect ({type(exc).__name__})"


def _where(method: str, url: httpx.URL | str) -> str:
    u = httpx.URL(str(url))
    return f"{method} {u.path}"


def with_retries(
    call: Callable[[], T],
    *,
    name: str,
    policy: RetryPolicy,
    classify: Callable[[BaseException], tuple[str, float | None] | None],
) -> T:
    """Run `call` with the retry policy, for clients that raise their own exceptions.

    `classify(exc)` says what a failure is: None (not retryable: re-raise), ("rate", wait)
    for a 429 (wait from Retry-After, or None), or ("server", None) for a 5xx/connection
    error. Used for googleapiclient, whose `HttpError` is not an httpx response.
    """
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:  # classify decides; anything it does not know re-raises
            kind = classify(exc)
            if kind is None:
                raise
            attempt += 1
            what, wait = kind
            if attempt > policy.max_retries:
                if what == "rate":
                    raise RateLimited(
                        f"{name}: still rate limited (HTTP 429) after {policy.max_retries} retries"
                    ) from None
                raise ApiError(
                    f"{name}: server kept failing ({_describe(exc)}) after "
                    f"{policy.max_retries} retries"
                ) from None
            if what == "rate" and wait is not None:
                policy.sleep(min(wait, policy.max_retry_after_s))
            else:
                policy.sleep(policy.backoff(attempt))


def _describe(exc: BaseException) -> str:
    status = getattr(getattr(exc, "resp", None), "status", None)
    if status is not None:
        return f"HTTP {status}"
    if isinstance(exc, http.client.IncompleteRead):
        return "connection dropped mid-response"
    return type(exc).__name__


class ApiClient:
    """GET JSON from one API base URL with bearer auth and bounded retries."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str,
        tokens: TokenProvider | None = None,
        policy: RetryPolicy | None = None,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.name = name
        self.tokens = tokens
        self.policy = policy or RetryPolicy()
        self.requests_made = 0
        self._http = httpx.Client(
            timeout=timeout_s,
            transport=transport,
            headers={"Accept": "application/json", **(headers or {})},
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """The decoded JSON body, or None for an empty body (no data)."""
        resp = self.request("GET", path, params=params)
        if resp.status_code == 204 or not resp.content.strip():
            return None
        try:
            return resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ApiError(
                f"{self.name}: {_where('GET', resp.request.url)} answered with something "
                "that is not JSON"
            ) from None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        data: Mapping[str, Any] | None = None,
        auth: bool = True,
        return_client_errors: bool = False,
    ) -> httpx.Response:
        """One request with the retry policy. With `return_client_errors`, a 4xx other than
        429 is handed back instead of raised (the token endpoint's `invalid_grant`)."""
        url = path if path.startswith(("http://", "https://")) else self.url(path)
        where = _where(method, url)
        attempt = 0
        refreshed = False
        while True:
            headers = {}
            if auth and self.tokens is not None:
                headers["Authorization"] = f"Bearer {self.tokens.access_token()}"
            try:
                self.requests_made += 1
                resp = self._http.request(method, url, params=params, data=data, headers=headers)
            except httpx.TransportError as exc:
                attempt += 1
                if attempt > self.policy.max_retries:
                    raise ApiError(
                        f"{self.name}: {where} {transport_problem(exc)} after "
                        f"{self.policy.max_retries} retries"
                    ) from None
                self.policy.sleep(self.policy.backoff(attempt))
                continue

            status = resp.status_code
            if return_client_errors and 400 <= status < 500 and status != 429:
                return resp
            if status == 401 and auth and self.tokens is not None and not refreshed:
                refreshed = True
                self.tokens.refresh()
                continue
            if status == 401 or status == 403:
                raise AuthError(
                    f"{self.name}: {where} was refused (HTTP {status}); "
                    f"run `rhythm auth {self.name}` again"
                )
            if status == 429:
                attempt += 1
                if attempt > self.policy.max_retries:
                    raise RateLimited(
                        f"{self.name}: still rate limited (HTTP 429) on {where} after "
                        f"{self.policy.max_retries} retries; try again later"
                    )
                wait = _rate_limit_wait(resp)
                if wait is None:
                    wait = self.policy.backoff(attempt)
                self.policy.sleep(min(wait, self.policy.max_retry_after_s))
                continue
            if status in RETRY_STATUSES:
                attempt += 1
                if attempt > self.policy.max_retries:
                    raise ApiError(
                        f"{self.name}: {where} kept failing (HTTP {status}) after "
                        f"{self.policy.max_retries} retries"
                    )
                self.policy.sleep(self.policy.backoff(attempt))
                continue
            if status >= 400:
                raise ApiError(f"{self.name}: {where} failed (HTTP {status})")
            return resp
