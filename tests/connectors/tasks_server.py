"""A loopback Google Tasks API v1 + Google OAuth server for tests (tests.loopback).

Speaks what the sync relies on, as the API reference documents it:

- ``GET /tasks/v1/users/@me/lists`` (tasklists.list: ``maxResults`` <= 100, ``pageToken``);
- ``GET /tasks/v1/lists/{tasklist}/tasks`` (tasks.list): ``updatedMin`` (tasks modified at
  or after it), ``showCompleted`` (default true), ``showHidden`` (default false: completed
  tasks cleared from the list, which is where Google's own apps put ticked-off tasks),
  ``showDeleted`` (default false), ``maxResults`` <= 100 (400 above), ``pageToken``, and short
  pages (``PAGE``) so the client must follow ``nextPageToken``;
- Bearer auth per access token *and scope*: a token without the tasks scope gets Google's 403
  ``insufficientPermissions`` / ``ACCESS_TOKEN_SCOPE_INSUFFICIENT``;
- ``POST /token``: the refresh_token grant (a ``scope`` parameter narrows the new token to it,
  as Google does; none keeps every granted scope) and the authorization_code grant (the
  scopes the authorisation asked for);
- ``GET /auth``: the consent screen, answered at once with a redirect carrying a code.

Every change moves a server clock one second on and stamps the task's ``updated``.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlencode

from tests.loopback import Loopback, Reply, Request

API = "/tasks/v1"
TOKEN_PATH = "/token"
AUTH_PATH = "/auth"
PAGE = 3
READ = "https://www.googleapis.com/auth/tasks.readonly"
WRITE = "https://www.googleapis.com/auth/tasks"
CALENDAR = "https://www.googleapis.com/auth/calendar.readonly"


def stamp(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _error(code: int, message: str, reason: str, status: str, detail: str | None = None) -> Reply:
    err: dict[str, Any] = {"code": code, "message": message, "status": status,
                           "errors": [{"message": message, "domain": "global", "reason": reason}]}
    if detail:
        err["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": detail,
                           "domain": "googleapis.com"}]
    return Reply.json({"error": err}, status=code)


class TasksServer:
    def __init__(self, srv: Loopback, granted: tuple[str, ...] = (CALENDAR, READ)):
        self.srv = srv
        self.clock = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
        self.lists: dict[str, dict[str, Any]] = {}
        self.tasks: dict[str, dict[str, dict[str, Any]]] = {}  # list id -> task id -> task
        self.faults: dict[str, list[Reply]] = {}
        self.granted = set(granted)  # what the person consented to
        self.refresh_token = "t-ref-0"
        self.token_scopes: dict[str, set[str]] = {"t-acc-0": set(self.granted)}
        self.auth_requests: list[Request] = []
        srv.route("GET", f"^{API}/.*$", self._api)
        srv.route("POST", TOKEN_PATH, self._token)
        srv.route("GET", AUTH_PATH, self._auth)

    @property
    def api_base(self) -> str:
        return self.srv.url + "/"

    @property
    def token_url(self) -> str:
        return self.srv.url + TOKEN_PATH

    @property
    def auth_url(self) -> str:
        return self.srv.url + AUTH_PATH

    # -- changing the account
    def tick(self) -> str:
        self.clock += timedelta(seconds=1)
        return stamp(self.clock)

    def add_list(self, lid: str, title: str) -> None:
        self.lists[lid] = {"kind": "tasks#taskList", "id": lid, "title": title, "updated": self.tick()}
        self.tasks.setdefault(lid, {})

    def drop_list(self, lid: str) -> None:
        del self.lists[lid]
        del self.tasks[lid]

    def put(self, lid: str, tid: str, title: str, completed: datetime | None = None, **extra: Any) -> dict:
        task: dict[str, Any] = {"kind": "tasks#task", "id": tid, "title": title, "position": "0",
                                "status": "needsAction", "selfLink": f"{API}/lists/{lid}/tasks/{tid}"}
        if completed is not None:
            task["status"] = "completed"
            task["completed"] = stamp(completed)
        task.update(extra)
        task["updated"] = self.tick()
        self.tasks[lid][tid] = task
        return task

    def delete(self, lid: str, tid: str) -> None:
        task = self.tasks[lid][tid]
        task["deleted"] = True
        task["updated"] = self.tick()

    def clear(self, lid: str) -> None:
        """tasks.clear: completed tasks are hidden (still there, still completed)."""
        for task in self.tasks[lid].values():
            if task.get("status") == "completed":
                task["hidden"] = True
                task["updated"] = self.tick()

    def issue(self, scopes: set[str]) -> str:
        token = "t-acc-" + secrets.token_hex(6)
        self.token_scopes[token] = set(scopes)
        return token

    # -- handlers
    def _token(self, req: Request) -> Reply:
        form = req.form
        grant = form.get("grant_type")
        if grant == "refresh_token" and form.get("refresh_token") == self.refresh_token:
            asked = set(form["scope"].split()) if form.get("scope") else set(self.granted)
            if not asked <= self.granted:
                return Reply.json({"error": "invalid_scope"}, status=400)
            token = self.issue(asked)
            return Reply.json({"access_token": token, "expires_in": 3599, "token_type": "Bearer",
                               "scope": " ".join(sorted(asked))})
        if grant == "authorization_code" and form.get("code", "").startswith("code-"):
            scopes = set(json.loads(bytes.fromhex(form["code"][5:]).decode()))
            self.granted = scopes
            token = self.issue(scopes)
            return Reply.json({"access_token": token, "expires_in": 3599, "token_type": "Bearer",
                               "refresh_token": self.refresh_token, "scope": " ".join(sorted(scopes))})
        return Reply.json({"error": "invalid_grant", "error_description": "Token has been expired or revoked."},
                          status=400)

    def _auth(self, req: Request) -> Reply:
        self.auth_requests.append(req)
        scopes = sorted(req.query.get("scope", "").split())
        code = "code-" + json.dumps(scopes).encode().hex()
        location = req.query["redirect_uri"] + "?" + urlencode({"code": code, "state": req.query["state"]})
        return Reply(302, headers={"Location": location})

    def _api(self, req: Request) -> Reply:
        path = unquote(req.path[len(API):])
        if self.faults.get(path):
            return self.faults[path].pop(0)
        scopes = self.token_scopes.get(req.bearer or "")
        if scopes is None:
            return _error(401, "Request had invalid authentication credentials.", "authError", "UNAUTHENTICATED")
        if not scopes & {READ, WRITE}:
            return _error(403, "Request had insufficient authentication scopes.", "insufficientPermissions",
                          "PERMISSION_DENIED", "ACCESS_TOKEN_SCOPE_INSUFFICIENT")
        try:
            size = int(req.query.get("maxResults", "20"))
        except ValueError:
            size = 0
        if not 1 <= size <= 100:
            return _error(400, "Invalid value for maxResults", "invalid", "INVALID_ARGUMENT")
        if path == "/users/@me/lists":
            return self._page(list(self.lists.values()), req, "tasks#taskLists")
        if path.startswith("/lists/") and path.endswith("/tasks"):
            lid = path[len("/lists/"):-len("/tasks")]
            if lid not in self.tasks:
                return _error(404, "Task list not found.", "notFound", "NOT_FOUND")
            return self._page(self._listed(lid, req.query), req, "tasks#tasks")
        return _error(404, "Not found", "notFound", "NOT_FOUND")

    def _listed(self, lid: str, q: dict[str, str]) -> list[dict[str, Any]]:
        def flag(name: str, default: bool) -> bool:
            return q[name] == "true" if name in q else default

        since = datetime.fromisoformat(q["updatedMin"].replace("Z", "+00:00")) if "updatedMin" in q else None
        out = []
        for tid in sorted(self.tasks[lid]):
            t = self.tasks[lid][tid]
            if t.get("deleted") and not flag("showDeleted", False):
                continue
            if t.get("hidden") and not flag("showHidden", False):
                continue
            if t.get("status") == "completed" and not flag("showCompleted", True):
                continue
            if since is not None and datetime.fromisoformat(t["updated"].replace("Z", "+00:00")) < since:
                continue
            out.append(t)
        return out

    def _page(self, items: list[dict[str, Any]], req: Request, kind: str) -> Reply:
        offset = int(req.query.get("pageToken") or 0)
        body: dict[str, Any] = {"kind": kind, "etag": '"e"', "items": items[offset:offset + PAGE]}
        if offset + PAGE < len(items):
            body["nextPageToken"] = str(offset + PAGE)
        return Reply.json(body)
