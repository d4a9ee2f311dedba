"""Rhythm's blocks in Google Calendar (API v3): insert, patch, delete, never anyone else's.

``push(writer, calendar_id, days, blocks, planned_at=..., zone=...)`` makes the Rhythm
events of those days in one calendar match the plan:

- each block is an event with the private extended properties ``rhythm = "1"``,
  ``rhythm_key`` (``2025-11-19-morning``), ``rhythm_day`` and ``rhythm_recommendation``;
  transparency ``transparent`` (shown as free) unless the block is busy (``opaque``); start
  and end in the person's zone (``timeZone``); an id ``rhmblock<32 hex>`` chosen by Rhythm;
- the day's Rhythm events are found with ``events.list(privateExtendedProperty=["rhythm=1",
  "rhythm_day=<day>"])``; a block whose key is there is patched (only when something
  changed), a new one inserted; a Rhythm event whose key is no longer in the plan is deleted,
  unless it had ended before the plan was made (a record of what was suggested); a second
  event with the same key (never made by this code, but possible by hand) is deleted;
- ``clear=True`` deletes every Rhythm event of those days and writes nothing;
- nothing is changed or deleted unless it carries ``rhythm = "1"`` in its *private*
  extended properties (checked again on every event the server returns): a title, an id
  or a shared property never counts.

An insert that reached the server but whose answer was lost (a 5xx, a dropped connection)
is retried with the same id: the server answers 409 and the event found under that id is
the block. Calls go through the project's retry policy (429 with Retry-After, 5xx,
connection errors). A 403 "insufficient authentication scopes" on a write means the stored
access token was refreshed by a read-only sync: it is refreshed once with the granted write
scope and the call repeated.

``open_writer(setting, tokens, policy)`` builds the client from the stored Google OAuth
token; writing needs the scope ``calendar.events`` (``rhythm auth google --write``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from typing import Any

from common.errors import ApiError, AuthError
from common.rhythm_blocks import (
    GOOGLE_DAY,
    GOOGLE_ID_PREFIX,
    GOOGLE_KEY,
    GOOGLE_MARK,
    GOOGLE_RECOMMENDATION,
    CalendarBlock,
    is_rhythm_google_event,
)
from connectors import google_http
from connectors.http import RetryPolicy, with_retries

READ_SCOPE = "https://www.googleapis.com/auth/calendar.readonly"
WRITE_SCOPE = "https://www.googleapis.com/auth/calendar.events"
FULL_SCOPE = "https://www.googleapis.com/auth/calendar"
WRITE_SCOPES = (READ_SCOPE, WRITE_SCOPE)
PAGE_SIZE = 250
_RATE_REASONS = {"rateLimitExceeded", "userRateLimitExceeded"}


def can_write(scope: str | None) -> bool | None:
    """Whether a granted scope string allows writing events (None: not recorded)."""
    if not scope:
        return None
    granted = set(scope.split())
    return WRITE_SCOPE in granted or FULL_SCOPE in granted


def new_event_id() -> str:
    """A fresh Google event id for a Rhythm block (base32hex: the prefix and 32 hex digits)."""
    return GOOGLE_ID_PREFIX + uuid.uuid4().hex


# -- the client ---------------------------------------------------------------------------------
class GoogleCalendarWriter:
    """events.list / insert / patch / delete / get with the project's retry policy.

    ``service`` is a googleapiclient Resource (``google_api.build_service``). ``on_call``
    runs after every successful call (to store a refreshed access token); ``reauthorize``
    refreshes the access token with the write scope (called at most once, on a 403 for
    missing scopes)."""

    def __init__(
        self,
        service: Any,
        *,
        policy: RetryPolicy | None = None,
        on_call: Callable[[], None] | None = None,
        reauthorize: Callable[[], None] | None = None,
    ):
        self.service = service
        self.policy = policy or RetryPolicy()
        self.on_call = on_call
        self.reauthorize = reauthorize
        self.requests_made = 0

    def _execute(self, request: Any, what: str, allow: tuple[int, ...] = ()) -> tuple[int, dict[str, Any]]:
        """(200, body), or (status, {}) for an HTTP status in ``allow``; else a mapped error."""
        from googleapiclient.errors import HttpError

        def call() -> Any:
            self.requests_made += 1
            return request.execute()

        reauthorized = False
        while True:
            try:
                body = with_retries(call, name="google", policy=self.policy, classify=_classify)
            except HttpError as exc:
                status = google_http.http_status(exc)
                if status in allow:
                    return int(status), {}
                if status == 403 and _insufficient_scope(exc) and self.reauthorize and not reauthorized:
                    reauthorized = True
                    self._refresh()
                    continue
                _raise_mapped(exc, what)
                raise
            except Exception as exc:
                _raise_mapped(exc, what)
                raise
            if self.on_call is not None:
                self.on_call()
            return 200, body if isinstance(body, dict) else {}

    def _refresh(self) -> None:
        try:
            self.reauthorize()  # type: ignore[misc]
        except Exception as exc:
            _raise_mapped(exc, "refreshing the access token")
            raise

    def rhythm_events(self, calendar_id: str, day: date) -> list[dict[str, Any]]:
        """The live events of ``calendar_id`` that carry Rhythm's private mark for ``day``."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kw: dict[str, Any] = {
                "calendarId": calendar_id,
                "privateExtendedProperty": [f"{GOOGLE_MARK}=1", f"{GOOGLE_DAY}={day.isoformat()}"],
                "singleEvents": True,
                "maxResults": PAGE_SIZE,
            }
            if token:
                kw["pageToken"] = token
            _, body = self._execute(self.service.events().list(**kw), f"listing calendar {calendar_id}")
            for ev in body.get("items") or []:
                # the server's filter is not trusted alone: the mark is checked on every event
                if isinstance(ev, dict) and ev.get("status") != "cancelled" and is_rhythm_google_event(ev):
                    private = ev["extendedProperties"]["private"]
                    if private.get(GOOGLE_DAY) == day.isoformat():
                        out.append(ev)
            token = body.get("nextPageToken")
            if not token:
                return out

    def get(self, calendar_id: str, event_id: str) -> dict[str, Any] | None:
        status, body = self._execute(
            self.service.events().get(calendarId=calendar_id, eventId=event_id),
            f"reading an event of calendar {calendar_id}", allow=(404, 410),
        )
        return body if status == 200 else None

    def insert(self, calendar_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Insert a Rhythm event (``body`` has its id). A 409 for that id means an earlier
        attempt of this very insert reached the server: that event is the result."""
        if not is_rhythm_google_event(body) or not str(body.get("id", "")).startswith(GOOGLE_ID_PREFIX):
            raise ValueError("only Rhythm's own events are inserted")
        status, created = self._execute(
            self.service.events().insert(calendarId=calendar_id, body=dict(body), sendUpdates="none"),
            f"adding a block to calendar {calendar_id}", allow=(409,),
        )
        if status == 200:
            return created
        found = self.get(calendar_id, str(body["id"]))
        if found is None or found.get("status") == "cancelled" or not is_rhythm_google_event(found):
            raise ApiError(f"google: calendar {calendar_id} refused a new block (HTTP 409: its id is taken)")
        return found

    def patch(self, calendar_id: str, event: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
        _only_rhythms(event)
        _, body = self._execute(
            self.service.events().patch(calendarId=calendar_id, eventId=event["id"], body=dict(changes),
                                        sendUpdates="none"),
            f"updating a block in calendar {calendar_id}",
        )
        return body

    def delete(self, calendar_id: str, event: Mapping[str, Any]) -> bool:
        """Delete a Rhythm event; False when it was already gone (404, 410)."""
        _only_rhythms(event)
        status, _ = self._execute(
            self.service.events().delete(calendarId=calendar_id, eventId=event["id"], sendUpdates="none"),
            f"removing a block from calendar {calendar_id}", allow=(404, 410),
        )
        return status == 200


def _only_rhythms(event: Mapping[str, Any]) -> None:
    """The guard before any change: an event without Rhythm's private mark is never touched."""
    if not is_rhythm_google_event(event) or not event.get("id"):
        raise ValueError("refusing to change an event Rhythm did not create")


# -- errors -------------------------------------------------------------------------------------
def _error_doc(exc: BaseException) -> dict[str, Any]:
    try:
        doc = json.loads(getattr(exc, "content", b"") or b"{}")
    except (ValueError, TypeError):
        return {}
    err = doc.get("error") if isinstance(doc, dict) else None
    return err if isinstance(err, dict) else {}


def _reasons(exc: BaseException) -> set[str]:
    errs = _error_doc(exc).get("errors")
    return {str(e.get("reason")) for e in errs if isinstance(e, dict)} if isinstance(errs, list) else set()


def _insufficient_scope(exc: BaseException) -> bool:
    err = _error_doc(exc)
    return "insufficientPermissions" in _reasons(exc) or "insufficient authentication scopes" in str(
        err.get("message", "")).lower()


def _classify(exc: BaseException) -> tuple[str, float | None] | None:
    return google_http.classify(exc, lambda e: bool(_reasons(e) & _RATE_REASONS))


def _raise_mapped(exc: BaseException, what: str) -> None:
    """Library errors as the project's, one line each (never quoting a token)."""
    from google.auth.exceptions import RefreshError
    from googleapiclient.errors import HttpError

    if isinstance(exc, RefreshError):
        raise AuthError("google: refresh token rejected; run `rhythm auth google --write` again") from None
    if isinstance(exc, HttpError):
        status = google_http.http_status(exc)
        if status == 401:
            raise AuthError("google: access refused (HTTP 401); run `rhythm auth google --write` again") from None
        if status == 403 and _insufficient_scope(exc):
            raise AuthError(
                "google: Rhythm may read but not write your calendar; run `rhythm auth google --write`"
            ) from None
        if status == 403:
            raise AuthError(f"google: {what}: no write access to this calendar (HTTP 403)") from None
        if status == 404:
            raise ApiError(f"google: {what}: not found (HTTP 404; check the calendar id)") from None
        raise ApiError(f"google: {what} failed (HTTP {status})") from None


# -- what an event should say ---------------------------------------------------------------------
def _zone_name(zone: tzinfo | None) -> str:
    name = getattr(zone, "key", None)
    return str(name) if name else "UTC"


def _when(t: datetime, zone: tzinfo | None) -> dict[str, str]:
    name = _zone_name(zone)
    local = t.astimezone(zone) if name != "UTC" and zone is not None else t.astimezone(UTC)
    return {"dateTime": local.replace(microsecond=0).isoformat(), "timeZone": name}


def event_body(block: CalendarBlock, zone: tzinfo | None) -> dict[str, Any]:
    """The fields Rhythm owns in a block's event (without its id)."""
    private = {GOOGLE_MARK: "1", GOOGLE_KEY: block.key, GOOGLE_DAY: block.day.isoformat()}
    if block.recommendation_id is not None:
        private[GOOGLE_RECOMMENDATION] = str(block.recommendation_id)
    return {
        "summary": block.summary,
        "description": block.description,
        "start": _when(block.start, zone),
        "end": _when(block.end, zone),
        "transparency": "opaque" if block.busy else "transparent",
        "extendedProperties": {"private": private},
    }


def _instant(part: Any) -> datetime | None:
    if not isinstance(part, dict) or not part.get("dateTime"):
        return None
    try:
        t = datetime.fromisoformat(str(part["dateTime"]).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else None


def changes(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``desired`` that ``existing`` does not already say ({} when none)."""
    out: dict[str, Any] = {}
    for name in ("summary", "description"):
        if (existing.get(name) or "") != desired[name]:
            out[name] = desired[name]
    if (existing.get("transparency") or "opaque") != desired["transparency"]:
        out["transparency"] = desired["transparency"]
    for name in ("start", "end"):
        have, want = existing.get(name) or {}, desired[name]
        if _instant(have) != _instant(want) or have.get("timeZone") != want["timeZone"]:
            out["start"], out["end"] = desired["start"], desired["end"]
    private = ((existing.get("extendedProperties") or {}).get("private") or {})
    want_private = desired["extendedProperties"]["private"]
    if any(private.get(k) != v for k, v in want_private.items()):
        out["extendedProperties"] = {"private": want_private}
    return out


# -- the push -------------------------------------------------------------------------------------
@dataclass
class PushResult:
    calendar_id: str
    days: list[str]
    inserted: list[str] = field(default_factory=list)  # block keys
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # over before the plan was made
    events: dict[str, str] = field(default_factory=dict)  # block key -> event id

    @property
    def writes(self) -> int:
        return len(self.inserted) + len(self.updated) + len(self.deleted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calendar_id": self.calendar_id, "days": list(self.days), "inserted": list(self.inserted),
            "updated": list(self.updated), "unchanged": list(self.unchanged), "deleted": list(self.deleted),
            "kept": list(self.kept), "events": dict(self.events),
        }


def push(
    writer: GoogleCalendarWriter,
    calendar_id: str,
    days: Sequence[date],
    blocks: Sequence[CalendarBlock],
    *,
    planned_at: Mapping[date, datetime],
    zone: tzinfo | None,
    clear: bool = False,
    new_id: Callable[[], str] = new_event_id,
) -> PushResult:
    """Make Rhythm's events of ``days`` in ``calendar_id`` the plan's ``blocks`` (see the
    module doc). ``planned_at[day]``: when that day's plan was made (a Rhythm event that had
    ended by then is kept when the plan no longer has it)."""
    result = PushResult(calendar_id, [d.isoformat() for d in days])
    wanted = [] if clear else list(blocks)
    outside = [b.key for b in wanted if b.day not in days]
    if outside:
        raise ValueError(f"blocks outside the days pushed: {', '.join(outside)}")
    for day in days:
        existing = _by_key(writer.rhythm_events(calendar_id, day))
        keep_key = {b.key for b in wanted if b.day == day}
        for key, events in existing.items():
            extra = events[1:] if key in keep_key else events
            made = planned_at.get(day)
            for ev in extra:
                end = _instant(ev.get("end"))
                if not clear and key not in keep_key and made is not None and end is not None and end <= made:
                    result.kept.append(key)
                    continue
                writer.delete(calendar_id, ev)
                result.deleted.append(key)
        for b in sorted((b for b in wanted if b.day == day), key=lambda b: (b.start, b.key)):
            desired = event_body(b, zone)
            found = existing.get(b.key)
            if found:
                ev = found[0]
                diff = changes(ev, desired)
                if diff:
                    ev = writer.patch(calendar_id, ev, diff) or ev
                    result.updated.append(b.key)
                else:
                    result.unchanged.append(b.key)
            else:
                ev = writer.insert(calendar_id, {"id": new_id(), **desired})
                result.inserted.append(b.key)
            result.events[b.key] = str(ev.get("id"))
    return result


def _by_key(events: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Rhythm's events of a day by block key, the earliest made first."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for ev in sorted(events, key=lambda e: (str(e.get("created") or ""), str(e.get("id")))):
        key = ev["extendedProperties"]["private"].get(GOOGLE_KEY)
        if key:
            out.setdefault(str(key), []).append(ev)
    return out


# -- opening it ------------------------------------------------------------------------------------
def open_writer(setting: Callable[[str], Any], tokens: Any, policy: RetryPolicy | None = None) -> GoogleCalendarWriter:
    """A writer on the stored Google OAuth token (``rhythm auth google --write``).

    Refreshed access tokens are stored again; a token refreshed for reading only is
    refreshed once more with the write scope when a write needs it."""
    from connectors.calendar import google_api
    from connectors.calendar.google_sync import credentials

    tok = tokens.load("google")
    if not tok or not tok.get("access_token"):
        raise AuthError("google: not authorised yet; run `rhythm auth google --write`")
    if can_write(tok.get("scope")) is False:
        raise AuthError(
            "google: Rhythm may read but not write your calendar; run `rhythm auth google --write` "
            "(or set google_write = true, then `rhythm auth google`)"
        )
    scopes = tuple(str(tok["scope"]).split()) if tok.get("scope") else WRITE_SCOPES
    creds = credentials(setting, tokens, scopes=scopes)
    service = google_api.build_service(setting("google_api_base"), creds)
    persist = google_http.token_saver(creds, tokens)

    def reauthorize() -> None:
        import google_auth_httplib2
        import httplib2

        creds.refresh(google_auth_httplib2.Request(httplib2.Http(timeout=60)))
        persist()

    return GoogleCalendarWriter(service, policy=policy, on_call=persist, reauthorize=reauthorize)
