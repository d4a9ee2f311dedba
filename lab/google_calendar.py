"""A loopback Google Calendar API v3 + OAuth token server (lab.loopback), for tests and for
benchmarks/implicit.py.

Speaks what the sync relies on: `users/me/calendarList` (the calendars it is given; the
tests give the recorded gcalvault response in tests/fixtures), `calendars/{id}/events` with `singleEvents`, `timeMin`, `pageToken`
(short pages, `nextPageToken`), `nextSyncToken` on the LAST page only, incremental
`syncToken` listings that return changed and cancelled events, 410 Gone for an expired sync
token, `timeMin` + `syncToken` refused with 400, Bearer auth, and a token endpoint for
refresh.

And what the write-back relies on (`rhythm plan push google`), in the v3 shapes:
`events.insert` (POST; a client-chosen id must be base32hex, 5-1024 characters, and unique in
the calendar, else 400 / 409 "duplicate"), `events.patch` (PATCH; objects merged, a null
removes), `events.delete` (DELETE: 204, then 410 "deleted"; the event stays as a cancelled
tombstone for incremental syncs), `events.get`, and `events.list` filtered by
`privateExtendedProperty` / `sharedExtendedProperty` (repeatable, all must match; private
ones only match private properties). The calendar id `primary` is the primary calendar.
Access tokens carry scopes: calendarList needs `calendar.readonly` (or `calendar`), writes
need `calendar.events` (or `calendar`), else 403 "insufficient authentication scopes"; a
refresh may ask for a subset of the scopes granted (`granted_scopes`), else 400
invalid_scope. The consent endpoint (`auth_url`) redirects with a code for the scopes asked
(or only those in `consent`, when the person unticks some; with `include_granted_scopes`
the earlier grant is kept), and the token endpoint trades it (PKCE checked). Faults: `faults[path]` or `faults["METHOD path"]` answer instead of the
server; `faults_after["METHOD path"]` answer *after* the request was carried out (a lost
answer).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import secrets
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlencode

from lab.loopback import Loopback, Reply, Request

API_PREFIX = "/calendar/v3"
TOKEN_PATH = "/token"
AUTH_PATH = "/o/oauth2/auth"
PAGE = 3  # Google may serve short pages; the client must follow nextPageToken
READONLY = "https://www.googleapis.com/auth/calendar.readonly"
EVENTS = "https://www.googleapis.com/auth/calendar.events"
CALENDAR = "https://www.googleapis.com/auth/calendar"
LIST_CALENDARS_OK = {READONLY, CALENDAR}
READ_EVENTS_OK = {READONLY, CALENDAR, EVENTS, "https://www.googleapis.com/auth/calendar.events.readonly"}
WRITE_EVENTS_OK = {EVENTS, CALENDAR}
EVENT_ID = re.compile(r"^[a-v0-9]{5,1024}$")


def one_calendar(cid: str, zone: str) -> dict[str, Any]:
    """A calendar list holding one primary calendar ``cid`` in ``zone``."""
    return {"kind": "calendar#calendarList", "items": [
        {"kind": "calendar#calendarListEntry", "id": cid, "summary": cid, "timeZone": zone, "selected": True,
         "accessRole": "owner", "primary": True}]}


def timed(eid: str, start: str, end: str, tz: str = "America/Los_Angeles", **extra: Any) -> dict[str, Any]:
    ev = {
        "kind": "calendar#event",
        "id": eid,
        "status": "confirmed",
        "summary": f"event {eid}",
        "start": {"dateTime": start, "timeZone": tz},
        "end": {"dateTime": end, "timeZone": tz},
        "updated": "2026-05-01T10:00:00.000Z",
        "eventType": "default",
    }
    ev.update(extra)
    return ev


def all_day(eid: str, start: str, end: str, **extra: Any) -> dict[str, Any]:
    ev = {
        "kind": "calendar#event",
        "id": eid,
        "status": "confirmed",
        "summary": f"all day {eid}",
        "start": {"date": start},
        "end": {"date": end},
        "updated": "2026-05-01T10:00:00.000Z",
        "transparency": "transparent",
    }
    ev.update(extra)
    return ev


class GoogleServer:
    def __init__(self, srv: Loopback, calendars: dict[str, Any]):
        self.srv = srv
        self.calendars = calendars
        self.events: dict[str, dict[str, dict[str, Any]]] = {}  # cid -> id -> event
        self.versions: dict[str, dict[str, int]] = {}  # cid -> id -> version changed at
        self.version = 0
        self.expired_tokens: set[str] = set()
        self.issued_tokens: set[str] = set()
        self.faults: dict[str, list[Reply]] = {}
        self.faults_after: dict[str, list[Reply]] = {}
        self.access_tokens: set[str] = {"g-acc-0"}
        self.token_scopes: dict[str, set[str]] = {}  # access token -> scopes (unlisted: read-only)
        self.refresh_token = "g-ref-0"
        self.granted_scopes: set[str] = {READONLY}  # what the refresh token was granted
        self.consent: set[str] | None = None  # the scopes the person ticks (None: all asked)
        self.codes: dict[str, dict[str, Any]] = {}
        for method in ("GET", "POST", "PATCH", "DELETE"):
            srv.route(method, f"^{API_PREFIX}/.*$", self._api)
        srv.route("POST", TOKEN_PATH, self._token)
        srv.route("GET", AUTH_PATH, self._authorize)

    @property
    def api_base(self) -> str:
        return self.srv.url + API_PREFIX

    @property
    def token_url(self) -> str:
        return self.srv.url + TOKEN_PATH

    @property
    def auth_url(self) -> str:
        return self.srv.url + AUTH_PATH

    # -- changing the calendar
    def put(self, cid: str, ev: dict[str, Any]) -> None:
        self.version += 1
        self.events.setdefault(cid, {})[ev["id"]] = ev
        self.versions.setdefault(cid, {})[ev["id"]] = self.version

    def cancel(self, cid: str, eid: str) -> None:
        self.put(cid, {"kind": "calendar#event", "id": eid, "status": "cancelled"})

    def expire_sync_tokens(self) -> None:
        self.expired_tokens |= self.issued_tokens

    def grant_write(self) -> str:
        """The person authorised with write access: the refresh token may ask for it; returns
        a fresh access token with read and write scopes."""
        self.granted_scopes = {READONLY, EVENTS}
        return self.issue_access_token(self.granted_scopes)

    def issue_access_token(self, scopes: set[str]) -> str:
        token = "g-acc-" + secrets.token_hex(6)
        self.access_tokens.add(token)
        self.token_scopes[token] = set(scopes)
        return token

    def calendar_id(self, cid: str) -> str:
        """`primary` is the primary calendar's id, as in the real API."""
        if cid == "primary":
            return next((c["id"] for c in self.calendars["items"] if c.get("primary")), cid)
        return cid

    def live(self, cid: str) -> dict[str, dict[str, Any]]:
        """The calendar's events that are not cancelled, by id."""
        return {i: e for i, e in self.events.get(self.calendar_id(cid), {}).items() if e.get("status") != "cancelled"}

    # -- handlers
    def _authorize(self, req: Request) -> Reply:
        q = req.query
        asked = set(q.get("scope", "").split())
        granted = asked if self.consent is None else asked & self.consent
        if q.get("include_granted_scopes") == "true":
            granted |= self.granted_scopes
        code = "code-" + secrets.token_hex(6)
        self.codes[code] = {"scopes": granted, "redirect_uri": q.get("redirect_uri"),
                            "challenge": q.get("code_challenge"), "client_id": q.get("client_id")}
        target = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q.get("state", ""), "scope": " ".join(sorted(granted))})
        return Reply(302, headers={"Location": target})

    def _token(self, req: Request) -> Reply:
        form = req.form
        if form.get("grant_type") == "authorization_code":
            grant = self.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if grant is None or grant["redirect_uri"] != form.get("redirect_uri") or (grant["challenge"] and grant["challenge"] != challenge):
                return Reply.json({"error": "invalid_grant", "error_description": "Bad Request"}, status=400)
            self.granted_scopes = set(grant["scopes"])
            self.refresh_token = "g-ref-" + secrets.token_hex(6)
            access = self.issue_access_token(self.granted_scopes)
            return Reply.json({"access_token": access, "expires_in": 3599, "refresh_token": self.refresh_token,
                               "scope": " ".join(sorted(self.granted_scopes)), "token_type": "Bearer"})
        if form.get("grant_type") == "refresh_token" and form.get("refresh_token") == self.refresh_token:
            asked = set((form.get("scope") or "").split()) or set(self.granted_scopes)
            if not asked <= self.granted_scopes:
                return Reply.json({"error": "invalid_scope", "error_description": "Bad Request"}, status=400)
            access = "g-acc-" + secrets.token_hex(6)
            self.access_tokens = {access}
            self.token_scopes[access] = asked
            return Reply.json({"access_token": access, "expires_in": 3599, "token_type": "Bearer", "scope": " ".join(sorted(asked))})
        return Reply.json({"error": "invalid_grant", "error_description": "Token has been expired or revoked."}, status=400)

    def _api(self, req: Request) -> Reply:
        path = unquote(req.path[len(API_PREFIX):])
        for key in (f"{req.method} {path}", path):
            if self.faults.get(key):
                return self.faults[key].pop(0)
        if req.bearer not in self.access_tokens:
            return Reply.json({"error": {"code": 401, "message": "Invalid Credentials"}}, status=401)
        scopes = self.token_scopes.get(req.bearer or "", {READONLY})
        reply = self._route(path, req, scopes)
        after = self.faults_after.get(f"{req.method} {path}")
        if after and reply.status < 300:
            return after.pop(0)  # done, but the answer is lost
        return reply

    def _route(self, path: str, req: Request, scopes: set[str]) -> Reply:
        if path == "/users/me/calendarList" and req.method == "GET":
            return Reply.json(self.calendars) if scopes & LIST_CALENDARS_OK else _insufficient()
        m = re.fullmatch(r"/calendars/([^/]+)/events(?:/([^/]+))?", path)
        if m is None:
            return Reply.json({"error": {"code": 404, "message": "Not Found"}}, status=404)
        cid, eid = self.calendar_id(m.group(1)), m.group(2)
        cal = next((c for c in self.calendars["items"] if c["id"] == cid), None)
        if cal is None:
            return _not_found()
        if req.method == "GET":
            if not scopes & READ_EVENTS_OK:
                return _insufficient()
            return self._events(cid, req) if eid is None else self._get(cid, eid)
        if not scopes & WRITE_EVENTS_OK:
            return _insufficient()
        if cal.get("accessRole") not in ("owner", "writer"):
            message = "You need to have writer access to this calendar."
            return Reply.json({"error": {"code": 403, "message": message, "errors": [{"domain": "calendar", "reason": "requiredAccessLevel", "message": message}]}}, status=403)
        if req.method == "POST" and eid is None:
            return self._insert(cid, req)
        if req.method == "PATCH" and eid is not None:
            return self._patch(cid, eid, req)
        if req.method == "DELETE" and eid is not None:
            return self._delete(cid, eid)
        return Reply.json({"error": {"code": 404, "message": "Not Found"}}, status=404)

    # -- events.get / insert / patch / delete
    def _get(self, cid: str, eid: str) -> Reply:
        ev = self.events.get(cid, {}).get(eid)
        return Reply.json(ev) if ev is not None else _not_found()

    def _insert(self, cid: str, req: Request) -> Reply:
        body = req.json()
        if not isinstance(body, dict):
            return _bad("Parse Error", "parseError")
        eid = body.get("id")
        if eid is None:
            eid = secrets.token_hex(13)
        elif not isinstance(eid, str) or not EVENT_ID.match(eid):
            return _bad("Invalid resource id value.", "invalid")
        if eid in self.events.get(cid, {}):
            return Reply.json({"error": {"code": 409, "message": "The requested identifier already exists.", "errors": [{"domain": "global", "reason": "duplicate", "message": "The requested identifier already exists."}]}}, status=409)
        now = _stamp()
        primary = self.calendar_id("primary")
        ev = {
            "kind": "calendar#event", "etag": f'"{secrets.token_hex(8)}"', "id": eid, "status": "confirmed",
            "htmlLink": f"https://www.google.com/calendar/event?eid={eid}", "created": now, "updated": now,
            "creator": {"email": primary, "self": True}, "organizer": {"email": cid, "self": cid == primary},
            "iCalUID": f"{eid}@google.com", "sequence": 0, "reminders": {"useDefault": True}, "eventType": "default",
        }
        ev.update({k: v for k, v in body.items() if k != "id"})
        problem = _invalid(ev)
        if problem:
            return _bad(problem, "invalid" if "Invalid" in problem else "required")
        self.put(cid, ev)
        return Reply.json(ev)

    def _patch(self, cid: str, eid: str, req: Request) -> Reply:
        old = self.events.get(cid, {}).get(eid)
        body = req.json()
        if old is None or old.get("status") == "cancelled":
            return _not_found()
        if not isinstance(body, dict):
            return _bad("Parse Error", "parseError")
        ev = _merge(copy.deepcopy(old), {k: v for k, v in body.items() if k not in ("id", "kind", "etag", "iCalUID")})
        problem = _invalid(ev)
        if problem:
            return _bad(problem, "invalid")
        if ev.get("start") != old.get("start") or ev.get("end") != old.get("end"):
            ev["sequence"] = int(old.get("sequence") or 0) + 1
        ev["updated"], ev["etag"] = _stamp(), f'"{secrets.token_hex(8)}"'
        self.put(cid, ev)
        return Reply.json(ev)

    def _delete(self, cid: str, eid: str) -> Reply:
        old = self.events.get(cid, {}).get(eid)
        if old is None:
            return _not_found()
        if old.get("status") == "cancelled":
            return Reply.json({"error": {"code": 410, "message": "Resource has been deleted", "errors": [{"domain": "global", "reason": "deleted", "message": "Resource has been deleted"}]}}, status=410)
        self.put(cid, {**old, "status": "cancelled", "updated": _stamp()})
        return Reply.empty(204)

    def _events(self, cid: str, req: Request) -> Reply:
        q = req.query
        private = req.query_lists.get("privateExtendedProperty", [])
        shared = req.query_lists.get("sharedExtendedProperty", [])
        if q.get("singleEvents") != "true":
            return Reply.json({"error": {"code": 400, "message": "test server wants singleEvents=true"}}, status=400)
        sync_token = q.get("syncToken")
        if sync_token and ("timeMin" in q or "timeMax" in q or "orderBy" in q):
            return Reply.json({"error": {"code": 400, "message": "syncToken cannot be combined with timeMin"}}, status=400)
        if sync_token in self.expired_tokens:
            return Reply.json({"error": {"code": 410, "message": "Sync token is no longer valid, a full sync is required.", "errors": [{"reason": "fullSyncRequired"}]}}, status=410)
        versions = self.versions.get(cid, {})
        events = self.events.get(cid, {})
        if sync_token:
            since = json.loads(base64.urlsafe_b64decode(sync_token))["v"]
            ids = [i for i, v in versions.items() if v > since]
        else:
            if "timeMin" not in q and not (private or shared):
                return Reply.json({"error": {"code": 400, "message": "test server wants timeMin on a full sync"}}, status=400)
            show_deleted = q.get("showDeleted") == "true"
            ids = [i for i in events if show_deleted or events[i].get("status") != "cancelled"]
        if private or shared:
            ids = [i for i in ids if _has(events[i], "private", private) and _has(events[i], "shared", shared)]
        ids.sort()
        offset = int(q.get("pageToken") or 0)
        page = ids[offset:offset + PAGE]
        body: dict[str, Any] = {
            "kind": "calendar#events",
            "summary": cid,
            "timeZone": next((c.get("timeZone") for c in self.calendars["items"] if c["id"] == cid), "UTC"),
            "items": [events[i] for i in page],
        }
        if offset + PAGE < len(ids):
            body["nextPageToken"] = str(offset + PAGE)
        else:
            token = base64.urlsafe_b64encode(json.dumps({"v": self.version, "n": secrets.token_hex(3)}).encode()).decode()
            self.issued_tokens.add(token)
            body["nextSyncToken"] = token
        return Reply.json(body)


def now_utc() -> datetime:
    return datetime.now(UTC)


def _stamp() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _has(ev: dict[str, Any], kind: str, constraints: list[str]) -> bool:
    """Every `name=value` constraint holds in the event's `kind` (private/shared) properties."""
    props = (ev.get("extendedProperties") or {}).get(kind) or {}
    for c in constraints:
        name, _, value = c.partition("=")
        if props.get(name) != value:
            return False
    return True


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Patch semantics: objects merged key by key, a null removes, anything else replaced."""
    for k, v in patch.items():
        if v is None:
            base.pop(k, None)
        elif isinstance(v, dict) and isinstance(base.get(k), dict):
            base[k] = _merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


def _invalid(ev: dict[str, Any]) -> str | None:
    for part in ("start", "end"):
        when = ev.get(part)
        if not isinstance(when, dict) or not (when.get("dateTime") or when.get("date")):
            return f"Missing {part} time."
    if bool(ev["start"].get("date")) != bool(ev["end"].get("date")):
        return "Start and end times must either both be date or both be dateTime."
    if ev["start"].get("dateTime"):
        try:
            a = datetime.fromisoformat(ev["start"]["dateTime"].replace("Z", "+00:00"))
            b = datetime.fromisoformat(ev["end"]["dateTime"].replace("Z", "+00:00"))
        except ValueError:
            return "Invalid start or end time."
        if a.tzinfo is None or b.tzinfo is None:
            return "Invalid start or end time."  # no timeZone handling in this server
        if b < a:
            return "The specified time range is empty."
    if ev.get("transparency") not in (None, "opaque", "transparent"):
        return "Invalid value for: transparency"
    for kind in ("private", "shared"):
        for k, v in ((ev.get("extendedProperties") or {}).get(kind) or {}).items():
            if len(k) > 44 or not isinstance(v, str) or len(v) > 1024:
                return f"Invalid extended property {k!r}."
    return None


def _bad(message: str, reason: str) -> Reply:
    return Reply.json({"error": {"code": 400, "message": message, "errors": [{"domain": "global", "reason": reason, "message": message}]}}, status=400)


def _not_found() -> Reply:
    return Reply.json({"error": {"code": 404, "message": "Not Found", "errors": [{"domain": "global", "reason": "notFound", "message": "Not Found"}]}}, status=404)


def _insufficient() -> Reply:
    return Reply.json({"error": {"code": 403, "message": "Request had insufficient authentication scopes.", "errors": [{"message": "Insufficient Permission", "domain": "global", "reason": "insufficientPermissions"}], "status": "PERMISSION_DENIED"}}, status=403)
