"""A loopback WHOOP API v2 + OAuth token server for tests, built on tests.loopback.

Speaks the real protocol: `{records, next_token}` pages sorted by start descending,
`nextToken`/`limit<=25`/`start`/`end` query parameters (the same start/end/limit required on
every page of one listing), Bearer auth with expiring access tokens, and a token endpoint
that rotates refresh tokens and rejects a used one with `invalid_grant`. Record payloads are
the WHOOP API examples (generated in the documentation's shapes by
lab/people/whoop.py), with ids and times varied.
"""

from __future__ import annotations

import base64
import copy
import json
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from lab.people.whoop import api_examples
from tests.loopback import Loopback, Reply, Request

API_PREFIX = "/developer"
TOKEN_PATH = "/oauth/oauth2/token"
AUTH_PATH = "/oauth/oauth2/auth"


def _example(name: str) -> dict[str, Any]:
    return api_examples()[name]["response"]["body"]


def sleep_template() -> dict[str, Any]:
    return _example("whoop-list-sleep-example.json")["records"][0]


def workout_template() -> dict[str, Any]:
    return _example("whoop-list-workouts-example.json")["records"][0]


def recovery_template() -> dict[str, Any]:
    return _example("whoop-get-recovery-example.json")


def z(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def make_days(n: int, first_night: datetime, pending_last: bool = False) -> dict[str, list[dict[str, Any]]]:
    """n physiological days: a cycle, a sleep, a recovery and a workout each.

    `first_night` is the first sleep onset (UTC). With `pending_last`, the newest sleep and
    recovery are PENDING_SCORE (no score), as WHOOP serves them right after waking.
    """
    out: dict[str, list[dict[str, Any]]] = {"cycle": [], "sleep": [], "recovery": [], "workout": []}
    for i in range(n):
        onset = first_night + timedelta(days=i)
        wake = onset + timedelta(hours=7, minutes=33)
        next_onset = onset + timedelta(days=1)
        cycle_id = 90000 + i
        sleep_id = str(uuid.UUID(int=i + 1))
        pending = pending_last and i == n - 1
        out["cycle"].append(
            {
                "id": cycle_id,
                "user_id": 10129,
                "created_at": z(onset),
                "updated_at": z(wake),
                "start": z(onset),
                "end": z(next_onset),
                "timezone_offset": "-04:00",
                "score_state": "SCORED",
                "score": {"strain": 10.0 + i % 7, "kilojoule": 8368.0, "average_heart_rate": 68, "max_heart_rate": 150},
            }
        )
        s = copy.deepcopy(sleep_template())
        s.update(id=sleep_id, cycle_id=cycle_id, start=z(onset), end=z(wake), created_at=z(wake), updated_at=z(wake))
        if pending:
            s["score_state"] = "PENDING_SCORE"
            s.pop("score", None)
        out["sleep"].append(s)
        r = copy.deepcopy(recovery_template())
        r.update(cycle_id=cycle_id, sleep_id=sleep_id, created_at=z(wake), updated_at=z(wake))
        r["score"] = dict(r["score"], recovery_score=float(40 + i % 50))
        if pending:
            r["score_state"] = "PENDING_SCORE"
            r.pop("score", None)
        out["recovery"].append(r)
        w = copy.deepcopy(workout_template())
        ws = wake + timedelta(hours=3)
        w.update(id=str(uuid.UUID(int=10_000 + i)), start=z(ws), end=z(ws + timedelta(minutes=62)), created_at=z(ws), updated_at=z(ws))
        out["workout"].append(w)
    return out


def score_pending(data: dict[str, list[dict[str, Any]]]) -> None:
    """WHOOP finished scoring: every PENDING_SCORE record becomes SCORED (same ids)."""
    for rec in data["sleep"]:
        if rec.get("score_state") == "PENDING_SCORE":
            rec["score_state"] = "SCORED"
            rec["score"] = copy.deepcopy(sleep_template()["score"])
            rec["updated_at"] = z(parse(rec["updated_at"]) + timedelta(minutes=20))
    for rec in data["recovery"]:
        if rec.get("score_state") == "PENDING_SCORE":
            rec["score_state"] = "SCORED"
            rec["score"] = dict(recovery_template()["score"], recovery_score=88.0)
            rec["updated_at"] = z(parse(rec["updated_at"]) + timedelta(minutes=20))


class WhoopServer:
    """State of the fake WHOOP: data, tokens, faults. Mount with `install(loopback)`."""

    COLLECTIONS = {
        "/v2/cycle": "cycle",
        "/v2/activity/sleep": "sleep",
        "/v2/recovery": "recovery",
        "/v2/activity/workout": "workout",
    }

    def __init__(self, srv: Loopback, data: dict[str, list[dict[str, Any]]] | None = None):
        self.srv = srv
        self.data = data or {"cycle": [], "sleep": [], "recovery": [], "workout": []}
        self.access_tokens: set[str] = set()
        self.refresh_token: str | None = None
        self.used_refresh_tokens: set[str] = set()
        self.faults: dict[str, list[Reply]] = {}  # path -> replies served before normal ones
        self.die_after_pages: int | None = None  # drop connections after N list pages
        self.pages_served = 0
        self.listings: dict[str, dict[str, str]] = {}  # next_token -> params it was issued for
        self.codes: dict[str, str] = {}  # auth code -> redirect_uri
        srv.route("GET", f"^{API_PREFIX}/v2/.*$", self._api)
        srv.route("POST", TOKEN_PATH, self._token)
        srv.route("GET", AUTH_PATH, self._authorize)

    # -- settings for the app under test
    @property
    def api_base(self) -> str:
        return self.srv.url + API_PREFIX

    @property
    def token_url(self) -> str:
        return self.srv.url + TOKEN_PATH

    @property
    def auth_url(self) -> str:
        return self.srv.url + AUTH_PATH

    def issue_tokens(self) -> dict[str, Any]:
        access = "acc-" + secrets.token_hex(8)
        self.access_tokens = {access}  # older access tokens die with the rotation
        if self.refresh_token:
            self.used_refresh_tokens.add(self.refresh_token)
        self.refresh_token = "ref-" + secrets.token_hex(8)
        return {
            "access_token": access,
            "refresh_token": self.refresh_token,
            "expires_in": 3600,
            "scope": "offline read:cycles read:sleep read:recovery read:workout read:profile",
            "token_type": "bearer",
        }

    # -- handlers
    def _authorize(self, req: Request) -> Reply:
        """The consent page, already accepted: redirect back with a code and the state."""
        q = req.query
        if q.get("client_id") != "cid" or q.get("response_type") != "code":
            return Reply.json({"error": "invalid_request"}, status=400)
        if "offline" not in q.get("scope", "").split() or len(q.get("state", "")) < 8:
            return Reply.json({"error": "invalid_scope_or_state"}, status=400)
        code = "code-" + secrets.token_hex(6)
        self.codes[code] = q["redirect_uri"]
        sep = "&" if "?" in q["redirect_uri"] else "?"
        return Reply(302, headers={"Location": f"{q['redirect_uri']}{sep}code={code}&state={q['state']}"})

    def _token(self, req: Request) -> Reply:
        form = req.form
        grant = form.get("grant_type")
        if form.get("client_id") != "cid" or form.get("client_secret") != "csecret":
            return Reply.json({"error": "invalid_client"}, status=401)
        if grant == "refresh_token":
            if form.get("refresh_token") != self.refresh_token:
                return Reply.json({"error": "invalid_grant", "error_description": "refresh token is invalid"}, status=400)
            return Reply.json(self.issue_tokens())
        if grant == "authorization_code":
            if form.get("code") not in self.codes or self.codes[form["code"]] != form.get("redirect_uri"):
                return Reply.json({"error": "invalid_grant"}, status=400)
            del self.codes[form["code"]]
            return Reply.json(self.issue_tokens())
        return Reply.json({"error": "unsupported_grant_type"}, status=400)

    def _api(self, req: Request) -> Reply:
        path = req.path[len(API_PREFIX):]
        if self.faults.get(path):
            return self.faults[path].pop(0)
        if req.bearer not in self.access_tokens:
            return Reply.json({"error": "unauthorized"}, status=401)
        if path == "/v2/user/profile/basic":
            return Reply.json({"user_id": 10129, "email": "jane@example.com", "first_name": "Jane", "last_name": "Doe"})
        if path.startswith("/v2/activity/sleep/"):
            sid = path.rsplit("/", 1)[1]
            for rec in self.data["sleep"]:
                if rec["id"] == sid:
                    return Reply.json(rec)
            return Reply.json({"error": "not found"}, status=404)
        stream = self.COLLECTIONS.get(path)
        if stream is None:
            return Reply.json({"error": "not found"}, status=404)
        return self._list(stream, req)

    def _list(self, stream: str, req: Request) -> Reply:
        q = dict(req.query)
        limit = int(q.get("limit", 10))
        if limit > 25:
            return Reply.json({"error": "limit must be <= 25"}, status=400)
        token = q.pop("nextToken", None)
        offset = 0
        if token is not None:
            issued = self.listings.get(token)
            if issued is None or issued != q:
                return Reply.json({"error": "nextToken does not match start/end/limit"}, status=400)
            offset = json.loads(base64.urlsafe_b64decode(token))["offset"]
        if self.die_after_pages is not None and self.pages_served >= self.die_after_pages:
            return Reply.drop()
        key = "created_at" if stream == "recovery" else "start"
        rows = sorted(self.data[stream], key=lambda r: r[key], reverse=True)
        if "start" in q:
            rows = [r for r in rows if parse(r[key]) >= parse(q["start"])]
        if "end" in q:
            rows = [r for r in rows if parse(r[key]) < parse(q["end"])]
        page = rows[offset:offset + limit]
        next_token = None
        if offset + limit < len(rows):
            next_token = base64.urlsafe_b64encode(json.dumps({"offset": offset + limit, "n": secrets.token_hex(2)}).encode()).decode()
            self.listings[next_token] = q
        self.pages_served += 1
        return Reply.json({"records": page, "next_token": next_token})
