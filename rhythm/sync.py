"""API syncs and OAuth authorisation: the units of work behind `rhythm sync` and `rhythm auth`.

One sync of one source is one transaction (STYLE rule 3): read each stream's cursor from
`sync_state`, fetch from the cursor minus the lag window, upsert the records, and store the
new cursor (the connector's `Checkpoint`, which comes after the stream's last page) in the
SAME transaction. If anything fails midway the transaction rolls back: no rows, no cursor
move. The error is then noted in `sync_state.last_error` and `runs` (outside the rolled-back
transaction) and the next source goes on. Re-running after a failure or an interrupt gives
exactly the rows of a clean run (upserts on natural keys).

Tokens never reach `runs`, `sync_state`, error lines or logs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common.errors import AuthError, ConfigError, RhythmError
from connectors.checkpoint import Checkpoint
from connectors.http import ApiClient, RetryPolicy
from connectors.oauth import (
    OAuth2Session,
    TokenStore,
    authorization_url,
    authorize_via_loopback,
    exchange_code,
    token_store,
)
from rhythm.lock import writer_lock
from rhythm.settings import SYNC_SOURCES, Settings
from storage import open_db
from storage.db import Database
from storage.writer import RecordWriter

WHOOP_STREAMS = ("cycle", "sleep", "recovery", "workout", "profile")
WHOOP_REDIRECT_PORT = 8765  # must match the redirect URL registered with the WHOOP app
GARMIN_LAG_DAYS = 2

# source, records written so far
SyncProgress = Callable[[str, int], None]


def default_policy() -> RetryPolicy:
    """The retry policy of real syncs (tests replace this function)."""
    return RetryPolicy()


def tokens(settings: Settings) -> TokenStore:
    return token_store(settings.tokens_dir, settings.token_backend)


def garmin_token_dir(settings: Settings) -> Path:
    return settings.tokens_dir / "garmin"


def configured_sources(settings: Settings) -> list[str]:
    """Sources with stored credentials, in the order they sync."""
    store = tokens(settings)
    out = []
    if store.load("whoop"):
        out.append("whoop")
    if store.load("google"):
        out.append("google")
    gdir = garmin_token_dir(settings)
    if gdir.is_dir() and any(gdir.iterdir()):
        out.append("garmin")
    return out


# -- sync ---------------------------------------------------------------------------------
def sync(
    settings: Settings,
    sources: Iterable[str] | None = None,
    progress: SyncProgress | None = None,
    *,
    policy: RetryPolicy | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Sync each source in its own transaction; a failing one does not stop the others.

    Returns {"ok": bool, "sources": {name: {"ok", "records", "tables", "cursors"} or
    {"ok": False, "error": line}}}.
    """
    names = list(sources) if sources else configured_sources(settings)
    unknown = [s for s in names if s not in SYNC_SOURCES]
    if unknown:
        raise ConfigError(f"unknown source {unknown[0]!r}; choose from {', '.join(SYNC_SOURCES)}")
    policy = policy or default_policy()
    results: dict[str, Any] = {}
    with writer_lock(settings.home, "rhythm sync"), open_db(settings.database) as db:
        for name in dict.fromkeys(names):
            started = datetime.now(UTC)
            try:
                results[name] = {"ok": True, **_sync_one(db, settings, name, progress, policy, now, started)}
            except RhythmError as exc:
                line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                _note_failure(db, name, line, started)
                results[name] = {"ok": False, "error": line}
            except Exception as exc:  # an unexpected payload must not stop the other sources
                line = f"{name}: unexpected {type(exc).__name__} while syncing: {str(exc)[:200]}"
                _note_failure(db, name, line, started)
                results[name] = {"ok": False, "error": line}
    return {"ok": all(r["ok"] for r in results.values()), "sources": results}


def _sync_one(
    db: Database,
    settings: Settings,
    name: str,
    progress: SyncProgress | None,
    policy: RetryPolicy,
    now: datetime | None,
    started: datetime,
) -> dict[str, Any]:
    cursors = _cursors(db, name)
    records, closer = _open_source(settings, name, cursors, policy, now)
    writer = RecordWriter(db)
    written = 0
    moved: dict[str, str | None] = {}
    try:
        with db.transaction():
            for rec in records:
                if isinstance(rec, Checkpoint):
                    writer.flush()
                    cursor = rec.cursor if rec.cursor is not None else cursors.get(rec.stream)
                    db.set_cursor(name, rec.stream, cursor)
                    moved[rec.stream] = cursor
                    continue
                writer.add(rec)
                written += 1
                if progress is not None and written % 100 == 0:
                    progress(name, written)
            writer.flush()
            summary = writer.summary.to_dict()
            summary["streams"] = sorted(moved)
            db.con.execute(
                "INSERT INTO runs (kind, source, target, started_at, finished_at, ok, summary) "
                "VALUES ('sync', ?, ?, ?, ?, true, ?)",
                [name, "api", started, datetime.now(UTC), json.dumps(summary)],
            )
    finally:
        closer()
    if progress is not None:
        progress(name, written)
    return {"records": written, "tables": summary["tables"], "streams": sorted(moved)}


def _cursors(db: Database, source: str) -> dict[str, str | None]:
    rows = db.con.execute(
        "SELECT stream, cursor FROM sync_state WHERE source = ?", [source]
    ).fetchall()
    return {stream: cursor for stream, cursor in rows}


def _note_failure(db: Database, source: str, line: str, started: datetime) -> None:
    """After the rollback: keep every cursor, note the error (best effort)."""
    try:
        with db.transaction():
            cursors = _cursors(db, source)
            streams = list(cursors) or [_default_stream(source)]
            for stream in streams:
                db.set_cursor(source, stream, cursors.get(stream), error=line)
            db.con.execute(
                "INSERT INTO runs (kind, source, target, started_at, finished_at, ok, summary) "
                "VALUES ('sync', ?, ?, ?, ?, false, ?)",
                [source, "api", started, datetime.now(UTC), json.dumps({"error": line})],
            )
    except RhythmError:
        pass


def _default_stream(source: str) -> str:
    return {"whoop": "cycle", "google": "calendarList", "garmin": "daily"}[source]


def _open_source(
    settings: Settings,
    name: str,
    cursors: dict[str, str | None],
    policy: RetryPolicy,
    now: datetime | None,
) -> tuple[Iterator[Any], Callable[[], None]]:
    if name == "whoop":
        return _whoop(settings, cursors, policy, now)
    if name == "google":
        return _google(settings, cursors, policy, now)
    return _garmin(settings, cursors, policy, now)


# -- WHOOP --------------------------------------------------------------------------------
def whoop_session(settings: Settings, policy: RetryPolicy) -> tuple[OAuth2Session, ApiClient]:
    token_http = ApiClient(settings.whoop_token_url, name="whoop", policy=policy)
    session = OAuth2Session(
        name="whoop",
        store=tokens(settings),
        token_url=settings.whoop_token_url,
        client_id=settings.whoop_client_id,
        client_secret=settings.whoop_client_secret,
        http=token_http,
        scope="offline",
    )
    return session, token_http


def whoop_since(cursors: dict[str, str | None], lag_days: int) -> dict[str, datetime | None]:
    from connectors.whoop.api import parse_ts

    since: dict[str, datetime | None] = {}
    for stream in WHOOP_STREAMS:
        ts = parse_ts(cursors.get(stream))
        since[stream] = None if ts is None else ts - timedelta(days=lag_days)
    return since


def _whoop(settings, cursors, policy, now):
    from connectors.whoop import api

    session, token_http = whoop_session(settings, policy)
    client = ApiClient(settings.whoop_api_base, name="whoop", tokens=session, policy=policy)

    def close() -> None:
        client.close()
        token_http.close()

    try:
        session.access_token()  # fail early (and refresh now) if the stored token is unusable
    except BaseException:
        close()
        raise

    return api.fetch(whoop_since(cursors, settings.whoop_lag_days), client, now=now), close


# -- Google -------------------------------------------------------------------------------
def google_client_config(settings: Settings) -> tuple[str, str | None]:
    """(client_id, client_secret) from settings or the downloaded client_secrets JSON."""
    cid, secret = settings.google_client_id, settings.google_client_secret
    if (not cid) and settings.google_client_secrets_file:
        path = Path(settings.google_client_secrets_file).expanduser()
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


def google_credentials(settings: Settings, store: TokenStore) -> Any:
    from google.oauth2.credentials import Credentials

    from connectors.calendar.google_api import SCOPES

    tok = store.load("google")
    if not tok or not tok.get("access_token"):
        raise AuthError("google: not authorised yet; run `rhythm auth google`")
    cid, secret = google_client_config(settings)
    expiry = None
    if tok.get("expires_at"):
        # google-auth compares naive UTC datetimes
        expiry = datetime.fromtimestamp(float(tok["expires_at"]), tz=UTC).replace(tzinfo=None)
    return Credentials(
        token=tok["access_token"],
        refresh_token=tok.get("refresh_token"),
        token_uri=settings.google_token_url,
        client_id=cid,
        client_secret=secret,
        scopes=list(SCOPES),
        expiry=expiry,
    )


def _google(settings, cursors, policy, now):
    from connectors.calendar import google_api

    store = tokens(settings)
    creds = google_credentials(settings, store)
    service = google_api.build_service(settings.google_api_base, creds)
    last = {"token": creds.token}

    def persist_refreshed() -> None:
        if creds.token and creds.token != last["token"]:
            tok = dict(store.load("google") or {})
            tok["access_token"] = creds.token
            if creds.refresh_token:
                tok["refresh_token"] = creds.refresh_token
            if creds.expiry is not None:
                tok["expires_at"] = creds.expiry.replace(tzinfo=UTC).timestamp()
            store.save("google", tok)
            last["token"] = creds.token

    client = google_api.GoogleCalendarClient(service, policy=policy, on_call=persist_refreshed)
    when = now or datetime.now(UTC)
    window = google_api.window_start_for(when, settings.google_window_past_days)
    since = {k: v for k, v in cursors.items() if k != "calendarList"}
    return google_api.fetch(since, client, window_start=window, now=now), lambda: None


# -- Garmin -------------------------------------------------------------------------------
def _garmin(settings, cursors, policy, now):
    from connectors.garmin import live

    client = live.open_client(garmin_token_dir(settings), api_base=settings.garmin_api_base, policy=policy)
    today = (now or datetime.now(UTC)).date()
    days = live.days_to_fetch(cursors.get(live.STREAM), today, settings.garmin_days, GARMIN_LAG_DAYS)
    return live.fetch(days, client, now=now), lambda: None


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
) -> dict[str, Any]:
    """Installed-app flow: loopback redirect on 127.0.0.1, PKCE, read-only calendar scope."""
    from google_auth_oauthlib.flow import Flow

    from connectors.calendar.google_api import SCOPES

    cid, secret = google_client_config(settings)
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
        flow = Flow.from_client_config(config, scopes=list(SCOPES), state=state, redirect_uri=redirect_uri)
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
    tokens(settings).save("google", tok)
    return _auth_summary("google", tok, settings)


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

