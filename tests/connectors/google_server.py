"""A loopback Google Calendar API v3 + OAuth token server for tests (tests.loopback).

Speaks what the sync relies on: `users/me/calendarList` (the recorded gcalvault response in
tests/fixtures), `calendars/{id}/events` with `singleEvents`, `timeMin`, `pageToken`
(short pages, `nextPageToken`), `nextSyncToken` on the LAST page only, incremental
`syncToken` listings that return changed and cancelled events, 410 Gone for an expired sync
token, `timeMin` + `syncToken` refused with 400, Bearer auth, and a token endpoint for
refresh.
"""

from __future__ import annotations

import base64
import json
import secrets
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from tests.fixtures import FIXTURES
from tests.loopback import Loopback, Reply, Request

CALENDAR_LIST = FIXTURES / "google_calendar" / "api_json" / "gcalvault_cal_list.json"
API_PREFIX = "/calendar/v3"
TOKEN_PATH = "/token"
PAGE = 3  # Google may serve short pages; the client must follow nextPageToken


def calendar_list() -> dict[str, Any]:
    return json.loads(CALENDAR_LIST.read_text())


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
    def __init__(self, srv: Loopback):
        self.srv = srv
        self.calendars = calendar_list()
        self.events: dict[str, dict[str, dict[str, Any]]] = {}  # cid -> id -> event
        self.versions: dict[str, dict[str, int]] = {}  # cid -> id -> version changed at
        self.version = 0
        self.expired_tokens: set[str] = set()
        self.issued_tokens: set[str] = set()
        self.faults: dict[str, list[Reply]] = {}
        self.access_tokens: set[str] = {"g-acc-0"}
        self.refresh_token = "g-ref-0"
        srv.route("GET", f"^{API_PREFIX}/.*$", self._api)
        srv.route("POST", TOKEN_PATH, self._token)

    @property
    def api_base(self) -> str:
        return self.srv.url + API_PREFIX

    @property
    def token_url(self) -> str:
        return self.srv.url + TOKEN_PATH

    # -- changing the calendar
    def put(self, cid: str, ev: dict[str, Any]) -> None:
        self.version += 1
        self.events.setdefault(cid, {})[ev["id"]] = ev
        self.versions.setdefault(cid, {})[ev["id"]] = self.version

    def cancel(self, cid: str, eid: str) -> None:
        self.put(cid, {"kind": "calendar#event", "id": eid, "status": "cancelled"})

    def expire_sync_tokens(self) -> None:
        self.expired_tokens |= self.issued_tokens

    # -- handlers
    def _token(self, req: Request) -> Reply:
        form = req.form
        if form.get("grant_type") == "refresh_token" and form.get("refresh_token") == self.refresh_token:
            access = "g-acc-" + secrets.token_hex(6)
            self.access_tokens = {access}
            return Reply.json({"access_token": access, "expires_in": 3599, "token_type": "Bearer", "scope": "https://www.googleapis.com/auth/calendar.readonly"})
        return Reply.json({"error": "invalid_grant", "error_description": "Token has been expired or revoked."}, status=400)

    def _api(self, req: Request) -> Reply:
        path = unquote(req.path[len(API_PREFIX):])
        if self.faults.get(path):
            return self.faults[path].pop(0)
        if req.bearer not in self.access_tokens:
            return Reply.json({"error": {"code": 401, "message": "Invalid Credentials"}}, status=401)
        if path == "/users/me/calendarList":
            return Reply.json(self.calendars)
        if path.startswith("/calendars/") and path.endswith("/events"):
            return self._events(path[len("/calendars/"):-len("/events")], req)
        return Reply.json({"error": {"code": 404}}, status=404)

    def _events(self, cid: str, req: Request) -> Reply:
        q = req.query
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
            if "timeMin" not in q:
                return Reply.json({"error": {"code": 400, "message": "test server wants timeMin on a full sync"}}, status=400)
            ids = [i for i in events if events[i].get("status") != "cancelled"]
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
