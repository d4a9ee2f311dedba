"""OAuth 2.0 for a local app: token storage, the loopback redirect, exchange and refresh.

- Tokens live in RHYTHM_HOME/tokens/NAME.json, mode 0600 in a 0700 folder, written
  atomically (temp file in the same folder, fsync, os.replace), or in the OS keyring when the
  `keyring` package is installed, working, and chosen.
- `authorize_via_loopback` runs a one-shot HTTP server on 127.0.0.1 that receives the
  redirect `?code=...&state=...`, checks `state` (CSRF guard) and returns the code.
- `OAuth2Session` hands out a valid access token: it refreshes when the token expires within
  `refresh_margin_s`, or once after a 401, and saves the rotated refresh token BEFORE the new
  access token is used (WHOOP's old refresh token stops working once rotated).

Tokens never appear in exceptions, logs or summaries: messages name the provider only.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from common.errors import ApiError, AuthError

KEYRING_SERVICE = "rhythm"


# -- token storage -----------------------------------------------------------------------
class TokenStore(Protocol):
    def load(self, name: str) -> dict[str, Any] | None: ...

    def save(self, name: str, token: Mapping[str, Any]) -> None: ...

    def delete(self, name: str) -> None: ...


class FileTokenStore:
    """One JSON file per provider, 0600, replaced atomically on every save."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def load(self, name: str) -> dict[str, Any] | None:
        p = self.path(name)
        try:
            text = p.read_text()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise AuthError(
                f"{name}: stored token file {p} is damaged; run `rhythm auth {name}` again"
            ) from None
        return data if isinstance(data, dict) else None

    def save(self, name: str, token: Mapping[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(OSError):
            os.chmod(self.directory, 0o700)
        # mkstemp creates the file with O_EXCL and mode 0600: private from its first byte
        # (never chmod-ed after), whatever the process umask
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(dict(token), fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path(name))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(name).unlink()


class KeyringTokenStore:
    """Tokens as JSON in the OS keyring (service "rhythm", user = provider name)."""

    def __init__(self, service: str = KEYRING_SERVICE):
        import keyring  # optional extra: rhythm[keyring]

        self._keyring = keyring
        self.service = service

    def load(self, name: str) -> dict[str, Any] | None:
        text = self._keyring.get_password(self.service, name)
        if not text:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise AuthError(f"{name}: keyring entry is damaged; run `rhythm auth {name}` again") from None
        return data if isinstance(data, dict) else None

    def save(self, name: str, token: Mapping[str, Any]) -> None:
        self._keyring.set_password(self.service, name, json.dumps(dict(token)))

    def delete(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self._keyring.delete_password(self.service, name)


def keyring_usable() -> bool:
    """True when `keyring` is importable and has a real (non-fail) backend."""
    try:
        import keyring
    except ImportError:
        return False
    try:
        backend = keyring.get_keyring()
    except Exception:  # a broken keyring configuration is "not usable", never fatal
        return False
    return float(getattr(backend, "priority", 0) or 0) > 0


def token_store(directory: str | Path, backend: str = "file") -> TokenStore:
    """`file` (default), `keyring`, or `auto` (keyring when usable, else file)."""
    if backend == "keyring" or (backend == "auto" and keyring_usable()):
        if not keyring_usable():
            raise AuthError("token backend 'keyring' chosen but no working keyring is installed")
        return KeyringTokenStore()
    return FileTokenStore(directory)


# -- token endpoint ----------------------------------------------------------------------
def _token_from_response(resp: dict[str, Any], now: float, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    if not isinstance(resp, dict) or not resp.get("access_token"):
        raise AuthError("token endpoint answered without an access token")
    token = dict(previous or {})
    token.update(resp)
    if not resp.get("refresh_token") and previous and previous.get("refresh_token"):
        token["refresh_token"] = previous["refresh_token"]
    expires_in = resp.get("expires_in")
    token["expires_at"] = now + float(expires_in) if expires_in is not None else None
    token["obtained_at"] = now
    return token


def _post_token(
    http: Any, token_url: str, form: Mapping[str, Any], *, name: str
) -> tuple[int, dict[str, Any]]:
    """POST to the token endpoint (with the retry policy when `http` is an ApiClient)."""
    if hasattr(http, "request") and hasattr(http, "policy"):
        resp = http.request("POST", token_url, data=dict(form), auth=False, return_client_errors=True)
    else:
        try:
            resp = http.post(token_url, data=dict(form), headers={"Accept": "application/json"})
        except httpx.TransportError as exc:
            raise ApiError(f"{name}: token endpoint unreachable ({type(exc).__name__})") from None
    try:
        body = resp.json() if resp.content else {}
    except ValueError:
        body = {}
    return resp.status_code, body if isinstance(body, dict) else {}


def exchange_code(
    http: Any,
    *,
    name: str,
    token_url: str,
    client_id: str,
    client_secret: str | None,
    code: str,
    redirect_uri: str,
    code_verifier: str | None = None,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Trade an authorisation code for tokens (authorization_code grant)."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
    }
    if client_secret:
        form["client_secret"] = client_secret
    if code_verifier:
        form["code_verifier"] = code_verifier
    status, body = _post_token(http, token_url, form, name=name)
    if status >= 400:
        err = str(body.get("error") or f"HTTP {status}")
        raise AuthError(f"{name}: the authorisation code was refused ({err}); try `rhythm auth {name}` again")
    return _token_from_response(body, clock(), None)


class OAuth2Session:
    """A TokenProvider backed by a store: refreshes and persists rotated tokens."""

    def __init__(
        self,
        *,
        name: str,
        store: TokenStore,
        token_url: str,
        client_id: str | None,
        client_secret: str | None,
        http: Any,
        scope: str | None = None,
        refresh_margin_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ):
        self.name = name
        self.store = store
        self.token_url = token_url
        self.client_id = client_id
        self.client_secret = client_secret
        self.http = http
        self.scope = scope
        self.refresh_margin_s = refresh_margin_s
        self.clock = clock
        self.refreshes = 0
        self._lock = threading.Lock()

    def _token(self) -> dict[str, Any]:
        token = self.store.load(self.name)
        if not token or not token.get("access_token"):
            raise AuthError(f"{self.name}: not authorised yet; run `rhythm auth {self.name}`")
        return token

    def access_token(self) -> str:
        token = self._token()
        expires_at = token.get("expires_at")
        if expires_at is not None and float(expires_at) - self.refresh_margin_s < self.clock():
            return self.refresh()
        return str(token["access_token"])

    def refresh(self) -> str:
        with self._lock:
            token = self._token()
            refresh_token = token.get("refresh_token")
            if not refresh_token:
                raise AuthError(
                    f"{self.name}: access token expired and no refresh token is stored; "
                    f"run `rhythm auth {self.name}` again"
                )
            if not self.client_id:
                raise AuthError(f"{self.name}: no client id configured (RHYTHM_{self.name.upper()}_CLIENT_ID)")
            form = {
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "client_id": self.client_id,
            }
            if self.client_secret:
                form["client_secret"] = self.client_secret
            if self.scope:
                form["scope"] = self.scope
            status, body = _post_token(self.http, self.token_url, form, name=self.name)
            if status >= 400:
                if status in (400, 401) or body.get("error") == "invalid_grant":
                    raise AuthError(
                        f"{self.name}: refresh token rejected; run `rhythm auth {self.name}` again"
                    )
                raise ApiError(f"{self.name}: token refresh failed (HTTP {status})")
            new = _token_from_response(body, self.clock(), token)
            # Persist first: once the server rotated it, the old refresh token is dead.
            self.store.save(self.name, new)
            self.refreshes += 1
            return str(new["access_token"])


# -- loopback redirect -------------------------------------------------------------------
_DONE_PAGE = (
    b"<!doctype html><html><body style='font-family:sans-serif'>"
    b"<h2>Rhythm is authorised.</h2><p>You can close this tab.</p></body></html>"
)
_FAIL_PAGE = (
    b"<!doctype html><html><body style='font-family:sans-serif'>"
    b"<h2>Authorisation failed.</h2><p>Go back to the terminal.</p></body></html>"
)


@dataclass
class Redirect:
    """What came back on the loopback redirect."""

    code: str
    redirect_uri: str


class _Catcher(HTTPServer):
    allow_reuse_address = True
    result: dict[str, str] | None = None


class _Handler(BaseHTTPRequestHandler):
    server: _Catcher

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        parts = urlsplit(self.path)
        if parts.path != self.server.expected_path:  # type: ignore[attr-defined]
            self.send_response(404)
            self.end_headers()
            return
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        self.server.result = query
        ok = "code" in query and query.get("state") == self.server.expected_state  # type: ignore[attr-defined]
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(_DONE_PAGE if ok else _FAIL_PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence: URLs hold codes
        return


def authorize_via_loopback(
    build_url: Callable[[str, str], str],
    *,
    name: str,
    on_url: Callable[[str], None] | None = None,
    open_browser: bool = True,
    host: str = "127.0.0.1",
    port: int = 0,
    path: str = "/callback",
    redirect_host: str | None = None,
    timeout_s: float = 300.0,
    state: str | None = None,
) -> Redirect:
    """Run the authorisation-code redirect on a one-shot local server.

    `build_url(redirect_uri, state)` returns the provider's authorisation URL. `on_url(url)`
    lets the caller show it (the CLI prints it); with `open_browser`, the default browser
    opens it too. Returns the code once the redirect arrives with the right `state`.
    """
    state = state or secrets.token_urlsafe(24)
    server = _Catcher((host, port), _Handler)
    server.expected_path = path  # type: ignore[attr-defined]
    server.expected_state = state  # type: ignore[attr-defined]
    try:
        bound_port = server.server_address[1]
        redirect_uri = f"http://{redirect_host or host}:{bound_port}{path}"
        url = build_url(redirect_uri, state)
        if on_url is not None:
            on_url(url)
        if open_browser:
            import webbrowser

            with contextlib.suppress(Exception):
                webbrowser.open(url)
        deadline = time.monotonic() + timeout_s
        while server.result is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AuthError(f"{name}: no answer from the browser within {int(timeout_s)} s; try again")
            server.timeout = min(left, 1.0)
            server.handle_request()
        result = server.result
    finally:
        server.server_close()
    if result.get("error"):
        raise AuthError(f"{name}: authorisation was refused ({result['error']})")
    if result.get("state") != state:
        raise AuthError(f"{name}: the redirect's state did not match (possible CSRF); try again")
    if not result.get("code"):
        raise AuthError(f"{name}: the redirect carried no authorisation code")
    return Redirect(code=result["code"], redirect_uri=redirect_uri)


def authorization_url(base: str, params: Mapping[str, str]) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}{urlencode(params)}"
