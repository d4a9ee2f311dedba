"""connectors.oauth: token files (0600, atomic), refresh and rotation, the loopback redirect."""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
import types
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from common.errors import AuthError
from connectors.http import ApiClient, RetryPolicy
from connectors.oauth import (
    FileTokenStore,
    KeyringTokenStore,
    OAuth2Session,
    authorization_url,
    authorize_via_loopback,
    exchange_code,
    token_store,
)
from tests.connectors.whoop_server import WhoopServer
from tests.loopback import Loopback, loopback_fixture  # noqa: F401

POLICY = RetryPolicy(max_retries=2, sleep=lambda s: None, jitter=False)


def _mode(p) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_token_file_is_0600_in_a_0700_folder_and_replaced_atomically(tmp_path):
    store = FileTokenStore(tmp_path / "tokens")
    store.save("whoop", {"access_token": "a1", "refresh_token": "r1"})
    store.save("whoop", {"access_token": "a2", "refresh_token": "r2"})
    path = tmp_path / "tokens" / "whoop.json"
    assert _mode(path) == 0o600
    assert _mode(tmp_path / "tokens") == 0o700
    assert store.load("whoop") == {"access_token": "a2", "refresh_token": "r2"}
    assert sorted(p.name for p in (tmp_path / "tokens").iterdir()) == ["whoop.json"]  # no temp left
    assert store.load("google") is None


def test_damaged_token_file_is_an_auth_error(tmp_path):
    (tmp_path / "whoop.json").write_text("{not json")
    with pytest.raises(AuthError, match="rhythm auth whoop"):
        FileTokenStore(tmp_path).load("whoop")


def test_keyring_backend_when_chosen(tmp_path, monkeypatch):
    saved: dict[tuple[str, str], str] = {}
    fake = types.ModuleType("keyring")
    fake.get_keyring = lambda: types.SimpleNamespace(priority=5)
    fake.get_password = lambda svc, user: saved.get((svc, user))
    fake.set_password = lambda svc, user, pw: saved.__setitem__((svc, user), pw)
    fake.delete_password = lambda svc, user: saved.pop((svc, user))
    monkeypatch.setitem(sys.modules, "keyring", fake)
    store = token_store(tmp_path, "auto")
    assert isinstance(store, KeyringTokenStore)
    store.save("google", {"access_token": "x"})
    assert store.load("google") == {"access_token": "x"}
    assert not list(tmp_path.iterdir())  # nothing on disk
    assert isinstance(token_store(tmp_path, "file"), FileTokenStore)


def test_keyring_requested_but_missing(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "keyring", None)  # import fails
    assert isinstance(token_store(tmp_path, "auto"), FileTokenStore)
    with pytest.raises(AuthError, match="keyring"):
        token_store(tmp_path, "keyring")


def _session(ws: WhoopServer, store: FileTokenStore, http: ApiClient, clock=time.time) -> OAuth2Session:
    return OAuth2Session(
        name="whoop", store=store, token_url=ws.token_url, client_id="cid",
        client_secret="csecret", http=http, scope="offline", clock=clock,
    )


def test_expired_token_refreshes_persists_rotation_and_old_refresh_token_dies(tmp_path, loopback):
    ws = WhoopServer(loopback)
    first = ws.issue_tokens()
    store = FileTokenStore(tmp_path)
    store.save("whoop", {**first, "expires_at": time.time() - 5})
    with ApiClient(ws.token_url, name="whoop", policy=POLICY) as http:
        session = _session(ws, store, http)
        new_access = session.access_token()
        assert new_access != first["access_token"] and new_access in ws.access_tokens
        saved = store.load("whoop")
        assert saved["refresh_token"] == ws.refresh_token != first["refresh_token"]
        assert saved["expires_at"] > time.time() + 3000
        assert _mode(store.path("whoop")) == 0o600
        # Someone still holding the old refresh token is refused by the server ...
        old = FileTokenStore(tmp_path / "old")
        old.save("whoop", {**first, "expires_at": 0})
        with pytest.raises(AuthError) as e:
            _session(ws, old, http).access_token()
    assert str(e.value) == "whoop: refresh token rejected; run `rhythm auth whoop` again"
    assert first["refresh_token"] not in str(e.value)
    assert first["refresh_token"] in ws.used_refresh_tokens


def test_valid_token_is_not_refreshed(tmp_path, loopback):
    ws = WhoopServer(loopback)
    tok = ws.issue_tokens()
    store = FileTokenStore(tmp_path)
    store.save("whoop", {**tok, "expires_at": time.time() + 3600})
    with ApiClient(ws.token_url, name="whoop", policy=POLICY) as http:
        assert _session(ws, store, http).access_token() == tok["access_token"]
    assert loopback.calls("POST") == []


def test_refresh_within_the_margin(tmp_path, loopback):
    ws = WhoopServer(loopback)
    tok = ws.issue_tokens()
    store = FileTokenStore(tmp_path)
    store.save("whoop", {**tok, "expires_at": 1000.0})
    with ApiClient(ws.token_url, name="whoop", policy=POLICY) as http:
        session = _session(ws, store, http, clock=lambda: 1000.0 - 59)  # 59 s left < 60 s margin
        assert session.access_token() != tok["access_token"]
    assert session.refreshes == 1


def test_not_authorised_yet(tmp_path, loopback):
    ws = WhoopServer(loopback)
    with ApiClient(ws.token_url, name="whoop", policy=POLICY) as http, pytest.raises(AuthError, match="rhythm auth whoop"):
        _session(ws, FileTokenStore(tmp_path), http).access_token()


def _browser(follow: bool = True, tamper_state: str | None = None, error: str | None = None):
    """A fake browser: visits the URL it is shown, in a thread, like a person would."""

    def on_url(url: str) -> None:
        def visit() -> None:
            if tamper_state is not None or error is not None:
                q = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
                target = q["redirect_uri"] + "?" + (
                    f"error={error}&state={q['state']}" if error else f"code=abc&state={tamper_state}"
                )
                httpx.get(target)
                return
            httpx.get(url, follow_redirects=follow)

        threading.Thread(target=visit, daemon=True).start()

    return on_url


def test_loopback_redirect_returns_the_code_and_exchange_gets_tokens(loopback):
    ws = WhoopServer(loopback)

    def build(redirect_uri: str, state: str) -> str:
        return authorization_url(ws.auth_url, {
            "response_type": "code", "client_id": "cid", "redirect_uri": redirect_uri,
            "scope": "offline read:cycles", "state": state,
        })

    red = authorize_via_loopback(build, name="whoop", on_url=_browser(), open_browser=False, timeout_s=10)
    assert red.redirect_uri.startswith("http://127.0.0.1:") and red.redirect_uri.endswith("/callback")
    with ApiClient(ws.token_url, name="whoop", policy=POLICY) as http:
        tok = exchange_code(
            http, name="whoop", token_url=ws.token_url, client_id="cid", client_secret="csecret",
            code=red.code, redirect_uri=red.redirect_uri,
        )
    assert tok["refresh_token"] == ws.refresh_token and tok["expires_at"] > time.time()
    # A code works once.
    with ApiClient(ws.token_url, name="whoop", policy=POLICY) as http, pytest.raises(AuthError):
        exchange_code(
            http, name="whoop", token_url=ws.token_url, client_id="cid", client_secret="csecret",
            code=red.code, redirect_uri=red.redirect_uri,
        )


def test_state_mismatch_is_refused():
    with pytest.raises(AuthError, match="state did not match"):
        authorize_via_loopback(
            lambda r, s: f"http://example.invalid/auth?redirect_uri={r}&state={s}",
            name="whoop", on_url=_browser(tamper_state="forged-state"), open_browser=False, timeout_s=10,
        )


def test_denied_consent_is_an_auth_error():
    with pytest.raises(AuthError, match="access_denied"):
        authorize_via_loopback(
            lambda r, s: f"http://example.invalid/auth?redirect_uri={r}&state={s}",
            name="google", on_url=_browser(error="access_denied"), open_browser=False, timeout_s=10,
        )


def test_no_answer_times_out():
    with pytest.raises(AuthError, match="no answer"):
        authorize_via_loopback(lambda r, s: "http://x.invalid/", name="whoop", open_browser=False, timeout_s=0.3)


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_token_bytes_are_never_in_a_file_others_can_read(tmp_path, monkeypatch, umask):
    """The mode is checked at the moment the token is written, not after: whatever the
    umask, the file holding it is 0600 before its first byte."""
    import json as json_module

    seen: list[int] = []
    real_dump = json_module.dump

    def spy(obj, fh, *args, **kw):
        seen.append(stat.S_IMODE(os.fstat(fh.fileno()).st_mode))
        return real_dump(obj, fh, *args, **kw)

    monkeypatch.setattr(json_module, "dump", spy)
    old = os.umask(umask)
    try:
        FileTokenStore(tmp_path / "tokens").save("google", {"access_token": "secret"})
    finally:
        os.umask(old)
    assert seen == [0o600]
    assert _mode(tmp_path / "tokens" / "google.json") == 0o600
