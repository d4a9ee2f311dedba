"""Authorising Oura: a personal access token, or OAuth2 (authorisation code, PKCE, refresh).

Plain functions the app shell calls (``rhythm.sync.auth_oura``); nothing here prompts,
prints or stores on its own. Tokens never appear in what these return or raise.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Callable
from typing import Any

from common.errors import AuthError
from connectors.http import ApiClient, RetryPolicy
from connectors.oauth import authorization_url, exchange_code
from connectors.oura.sync import NAME, PERSONAL, PersonalToken

SCOPES = ("daily", "heartrate", "workout")  # sleep, readiness, activity, stress; heart rate; workouts
CHECK_PATH = "/v2/usercollection/personal_info"  # answers any valid token (no scope needed)


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge) per RFC 7636."""
    verifier = secrets.token_urlsafe(64)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def auth_url(base: str, client_id: str, redirect_uri: str, state: str, challenge: str) -> str:
    return authorization_url(
        base,
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": " ".join(SCOPES),
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        },
    )


def exchange(
    http: ApiClient, *, token_url: str, client_id: str, client_secret: str | None, code: str,
    redirect_uri: str, verifier: str,
) -> dict[str, Any]:
    """The authorisation code traded for tokens, marked as an OAuth token."""
    tok = exchange_code(
        http, name=NAME, token_url=token_url, client_id=client_id, client_secret=client_secret,
        code=code, redirect_uri=redirect_uri, code_verifier=verifier,
    )
    if not tok.get("refresh_token"):
        raise AuthError("oura: no refresh token came back; try `rhythm auth oura` again")
    return {**tok, "kind": "oauth"}


def check_token(api_base: str, token: str, policy: RetryPolicy) -> str | None:
    """Ask Oura who the token belongs to: the user id, or AuthError if it is refused."""
    with ApiClient(api_base, name=NAME, tokens=PersonalToken(token), policy=policy) as client:
        body = client.get_json(CHECK_PATH)
    return str(body["id"]) if isinstance(body, dict) and body.get("id") is not None else None


def personal_token(token: str, clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """What is stored for a personal access token (no expiry, no refresh)."""
    token = token.strip()
    if not token:
        raise AuthError("oura: no token given")
    return {"access_token": token, "kind": PERSONAL, "expires_at": None, "obtained_at": clock()}
