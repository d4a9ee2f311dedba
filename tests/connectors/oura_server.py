"""A loopback Oura API v2 + OAuth server for tests, built on tests.loopback.

Speaks the documented protocol (Oura API v2 OpenAPI 1.35, see connectors/oura/README.md):
`GET /v2/usercollection/<stream>` answers `{data, next_token}`; the token goes back as
`next_token` with the same other parameters (anything else is a 400); `start_date`/`end_date`
filter the dated streams, `start_datetime`/`end_datetime` heart rate (at most 30 days a
request, bounds inclusive); `Authorization: Bearer` with expiring OAuth access tokens or
personal tokens; `POST /oauth/token` for the authorization_code (with PKCE S256) and
refresh_token grants (a refresh token works once: Oura rotates it); `GET /oauth/authorize`
as a consent page already accepted. It also keeps the date-filter quirks users report
(README "Quirks"): `sleep` treats `start_date` as exclusive and the daily collections read
a date-only `end_date` as midnight, so that day is left out.

Sample documents are written here from the published schemas (no recorded data): every
field the schema lists, consistent with each other (stage seconds add up to the
hypnogram, `time_in_bed` to the bedtimes), seeded, with the ring's local offset per day.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import random
import secrets
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

from tests.loopback import Loopback, Reply, Request

API_PREFIX = "/v2/usercollection"
TOKEN_PATH = "/oauth/token"
AUTH_PATH = "/oauth/authorize"
CLIENT_ID, CLIENT_SECRET = "oura-cid", "oura-csecret"
DATED = ("daily_sleep", "sleep", "daily_readiness", "daily_activity", "daily_stress", "workout")
STAGE_OF = {"1": "deep", "2": "light", "3": "rem", "4": "awake"}


def berlin_like(day: date) -> int:
    """+01:00 until the last Sunday of March 2026-ish, +02:00 after: a DST change inside."""
    return 60 if day.toordinal() % 40 < 20 else 120


def iso_local(ts: datetime, offset_min: int, ms: bool = False) -> str:
    local = ts.astimezone(timezone(timedelta(minutes=offset_min)))
    return local.isoformat(timespec="milliseconds" if ms else "seconds")


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128)))


def hypnogram(rng: random.Random, epochs: int) -> str:
    """5-minute phases: awake at both ends, cycles of light, deep and REM between."""
    out = ["4"] * rng.randint(1, 3)
    while len(out) < epochs - 2:
        out += ["2"] * rng.randint(2, 6) + ["1"] * rng.randint(1, 5) + ["2"] * rng.randint(1, 3) + ["3"] * rng.randint(1, 5)
        if rng.random() < 0.3:
            out.append("4")
    out = out[: epochs - 2] + ["4", "4"]
    return "".join(out)


def make_days(
    n: int,
    last_day: date,
    *,
    offset_of: Callable[[date], int] = berlin_like,
    seed: int = 7,
    heart_rate: bool = True,
    naps_every: int = 4,
    workout_every: int = 3,
    until: datetime | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """n days of Oura documents ending on `last_day` (its activity is a day in progress);
    heart rate only up to `until` when given (the ring has not measured the future)."""
    rng = random.Random(seed)
    data: dict[str, list[dict[str, Any]]] = {s: [] for s in (*DATED, "heartrate")}
    for i in range(n):
        day = last_day - timedelta(days=n - 1 - i)
        off = offset_of(day)
        tz = timezone(timedelta(minutes=off))
        midnight = datetime(day.year, day.month, day.day, tzinfo=tz)
        # the night that ends this morning
        onset = midnight - timedelta(minutes=rng.randint(20, 110))
        epochs = rng.randint(84, 108)
        phases = hypnogram(rng, epochs)
        wake = onset + timedelta(minutes=5 * epochs)
        secs = {s: phases.count(k) * 300 for k, s in STAGE_OF.items()}
        hr_items = [None] + [rng.randint(46, 62) for _ in range(epochs - 1)]
        lowest = min(x for x in hr_items if x is not None)
        night = {
            "id": _uuid(rng),
            "average_breath": round(rng.uniform(12.5, 16.5), 3),
            "average_heart_rate": round(rng.uniform(50, 60), 3),
            "average_hrv": rng.randint(28, 85),
            "awake_time": secs["awake"],
            "bedtime_end": iso_local(wake, off),
            "bedtime_start": iso_local(onset, off),
            "day": day.isoformat(),
            "deep_sleep_duration": secs["deep"],
            "efficiency": round(100 * (1 - secs["awake"] / (300 * epochs))),
            "heart_rate": {"interval": 300.0, "items": hr_items, "timestamp": iso_local(onset, off, ms=True)},
            "hrv": {"interval": 300.0, "items": [None] + [rng.randint(20, 110) for _ in range(epochs - 1)],
                    "timestamp": iso_local(onset, off, ms=True)},
            "latency": rng.choice([300, 540, 900]),
            "light_sleep_duration": secs["light"],
            "low_battery_alert": False,
            "lowest_heart_rate": lowest,
            "movement_30_sec": "".join(rng.choice("1112") for _ in range(epochs * 10)),
            "period": 0,
            "readiness": {"contributors": {"activity_balance": rng.randint(40, 100)}, "score": rng.randint(55, 95),
                          "temperature_deviation": 0.1, "temperature_trend_deviation": 0.0},
            "readiness_score_delta": rng.randint(-3, 3),
            "rem_sleep_duration": secs["rem"],
            "restless_periods": rng.randint(100, 400),
            "sleep_algorithm_version": "v2",
            "sleep_analysis_reason": "foreground_sleep_analysis",
            "sleep_phase_30_sec": "".join(c * 10 for c in phases),
            "sleep_phase_5_min": phases,
            "sleep_score_delta": rng.randint(-3, 3),
            "time_in_bed": 300 * epochs,
            "total_sleep_duration": secs["deep"] + secs["light"] + secs["rem"],
            "type": "long_sleep",
            "ring_id": None,
            "app_sleep_phase_5_min": phases,
        }
        data["sleep"].append(night)
        if naps_every and i % naps_every == 2:  # an afternoon nap (type "sleep": under 3 h)
            ns = midnight + timedelta(hours=14, minutes=rng.randint(0, 50))
            nap_epochs = rng.randint(4, 9)
            nap_phases = "4" + "2" * (nap_epochs - 2) + "4"
            data["sleep"].append({
                **{k: None for k in ("average_breath", "average_heart_rate", "average_hrv", "heart_rate", "hrv",
                                     "readiness", "readiness_score_delta", "sleep_score_delta", "ring_id",
                                     "restless_periods", "movement_30_sec", "sleep_phase_30_sec")},
                "id": _uuid(rng), "day": day.isoformat(), "type": "sleep", "period": 1,
                "bedtime_start": iso_local(ns, off), "bedtime_end": iso_local(ns + timedelta(minutes=5 * nap_epochs), off),
                "time_in_bed": 300 * nap_epochs, "awake_time": 600, "light_sleep_duration": 300 * (nap_epochs - 2),
                "deep_sleep_duration": 0, "rem_sleep_duration": 0, "total_sleep_duration": 300 * (nap_epochs - 2),
                "efficiency": round(100 * (nap_epochs - 2) / nap_epochs), "latency": 300, "lowest_heart_rate": 58,
                "low_battery_alert": False, "sleep_phase_5_min": nap_phases, "app_sleep_phase_5_min": nap_phases,
                "sleep_algorithm_version": "v2", "sleep_analysis_reason": "foreground_sleep_analysis",
            })
        data["daily_sleep"].append({
            "id": _uuid(rng), "day": day.isoformat(), "score": rng.randint(55, 95),
            "contributors": {k: rng.randint(40, 100) for k in ("deep_sleep", "efficiency", "latency", "rem_sleep",
                                                              "restfulness", "timing", "total_sleep")},
            "timestamp": f"{day.isoformat()}T00:00:00+00:00",
        })
        data["daily_readiness"].append({
            "id": _uuid(rng), "day": day.isoformat(), "score": rng.randint(50, 98),
            "contributors": {k: rng.randint(30, 100) for k in (
                "activity_balance", "body_temperature", "hrv_balance", "previous_day_activity", "previous_night",
                "recovery_index", "resting_heart_rate", "sleep_balance", "sleep_regularity")},
            "temperature_deviation": round(rng.uniform(-0.6, 0.6), 2),
            "temperature_trend_deviation": round(rng.uniform(-0.3, 0.3), 2),
            "timestamp": f"{day.isoformat()}T00:00:00+00:00",
        })
        day_start = midnight + timedelta(hours=4)  # Oura's day: 24 hours from 04:00 local
        today = i == n - 1
        steps = rng.randint(2500, 6000) if today else rng.randint(3000, 19000)
        medium, high = rng.randint(10, 90) * 60, rng.randint(0, 40) * 60
        data["daily_activity"].append({
            "id": _uuid(rng), "day": day.isoformat(), "score": rng.randint(50, 99),
            "active_calories": steps // 20, "average_met_minutes": round(rng.uniform(1.2, 2.4), 5),
            "class_5_min": "".join(rng.choice("1223334") for _ in range(288)),
            "contributors": {k: rng.randint(1, 100) for k in (
                "meet_daily_targets", "move_every_hour", "recovery_time", "stay_active", "training_frequency",
                "training_volume")},
            "equivalent_walking_distance": int(steps * 0.8),
            "high_activity_met_minutes": high // 60 * 8, "high_activity_time": high,
            "inactivity_alerts": rng.randint(0, 3),
            "low_activity_met_minutes": rng.randint(50, 300), "low_activity_time": rng.randint(60, 300) * 60,
            "medium_activity_met_minutes": medium // 60 * 4, "medium_activity_time": medium,
            "met": {"interval": 60.0, "items": [round(rng.uniform(0.9, 3.5), 1) for _ in range(1440)],
                    "timestamp": iso_local(day_start, off, ms=True)},
            "meters_to_target": rng.randint(-5000, 8000), "non_wear_time": rng.randint(0, 3600),
            "resting_time": rng.randint(20000, 30000), "sedentary_met_minutes": rng.randint(5, 20),
            "sedentary_time": rng.randint(15000, 30000), "steps": steps, "target_calories": 350,
            "target_meters": 7000, "timestamp": iso_local(day_start, off),
            "total_calories": 1800 + steps // 20,
        })
        data["daily_stress"].append({
            "id": _uuid(rng), "day": day.isoformat(),
            "day_summary": rng.choice(["restored", "normal", "stressful"]),
            "recovery_high": rng.randint(0, 40) * 300 if not today else None,
            "stress_high": rng.randint(0, 30) * 300,
        })
        if workout_every and i % workout_every == 1:
            ws = midnight + timedelta(hours=17, minutes=rng.randint(0, 59))
            we = ws + timedelta(minutes=rng.randint(25, 80))
            data["workout"].append({
                "id": _uuid(rng), "activity": rng.choice(["running", "cycling", "walking", "strengthTraining"]),
                "calories": round(rng.uniform(150, 700), 1), "day": day.isoformat(),
                "distance": round(rng.uniform(2000, 15000), 1) if rng.random() < 0.7 else None,
                "end_datetime": iso_local(we, off), "intensity": rng.choice(["easy", "moderate", "hard"]),
                "label": None, "source": rng.choice(["autodetected", "confirmed", "manual"]),
                "start_datetime": iso_local(ws, off),
            })
        if heart_rate:  # every 5 minutes of the UTC day, in UTC like Oura writes them
            base = datetime(day.year, day.month, day.day, tzinfo=UTC)
            for k in range(288):
                ts = base + timedelta(minutes=5 * k, seconds=rng.randint(0, 59))
                if until is not None and ts > until:
                    break
                src = "sleep" if onset <= ts <= wake else rng.choice(["awake", "awake", "rest"])
                data["heartrate"].append({"timestamp": ts.isoformat(timespec="seconds"),
                                          "timestamp_unix": int(ts.timestamp() * 1000),
                                          "bpm": rng.randint(48, 62) if src == "sleep" else rng.randint(58, 110),
                                          "source": src})
    return data


@functools.lru_cache(maxsize=1 << 16)
def _parse_dt(text: str) -> datetime:
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt


class OuraServer:
    """State of the fake Oura: data, tokens, faults. Mounted on a Loopback at creation."""

    def __init__(self, srv: Loopback, data: dict[str, list[dict[str, Any]]] | None = None):
        self.srv = srv
        self.data = data or {s: [] for s in (*DATED, "heartrate")}
        self.page_size = {s: 10 for s in DATED} | {"heartrate": 1000}
        self.access_tokens: set[str] = set()
        self.personal_tokens: set[str] = {"pat-" + secrets.token_hex(8)}
        self.refresh_token: str | None = None
        self.used_refresh_tokens: set[str] = set()
        self.refreshes = 0
        self.faults: dict[str, list[Reply]] = {}  # stream -> replies served before normal ones
        self.listings: dict[str, dict[str, str]] = {}  # next_token -> the query it belongs to
        self.codes: dict[str, tuple[str, str]] = {}  # auth code -> (redirect_uri, code_challenge)
        srv.route("GET", f"^{API_PREFIX}/[a-z_0-9]+$", self._api)
        srv.route("POST", TOKEN_PATH, self._token)
        srv.route("GET", AUTH_PATH, self._authorize)

    # -- for the app under test
    @property
    def api_base(self) -> str:
        return self.srv.url

    @property
    def token_url(self) -> str:
        return self.srv.url + TOKEN_PATH

    @property
    def auth_url(self) -> str:
        return self.srv.url + AUTH_PATH

    @property
    def pat(self) -> str:
        return next(iter(self.personal_tokens))

    def issue_tokens(self) -> dict[str, Any]:
        access = "oacc-" + secrets.token_hex(8)
        self.access_tokens = {access}  # older access tokens die with the rotation
        if self.refresh_token:
            self.used_refresh_tokens.add(self.refresh_token)
        self.refresh_token = "oref-" + secrets.token_hex(8)
        return {"access_token": access, "refresh_token": self.refresh_token, "expires_in": 86400,
                "token_type": "bearer", "scope": "daily heartrate workout"}

    def expire_access_tokens(self) -> None:
        """Oura revoked the access tokens early: the next call is a 401, then a refresh."""
        self.access_tokens = set()

    def calls(self, stream: str) -> list[Request]:
        return self.srv.calls("GET", f"{API_PREFIX}/{stream}")

    def doc(self, stream: str, day: date) -> dict[str, Any]:
        return next(d for d in self.data[stream] if d["day"] == day.isoformat())

    # -- handlers
    def _authorize(self, req: Request) -> Reply:
        q = req.query
        if q.get("client_id") != CLIENT_ID or q.get("response_type") != "code":
            return Reply.json({"error": "invalid_request"}, status=400)
        if q.get("code_challenge_method") != "S256" or len(q.get("code_challenge", "")) < 43:
            return Reply.json({"error": "invalid_request", "error_description": "PKCE required"}, status=400)
        if not {"daily", "heartrate", "workout"} <= set(q.get("scope", "").split()) or len(q.get("state", "")) < 8:
            return Reply.json({"error": "invalid_scope_or_state"}, status=400)
        code = "code-" + secrets.token_hex(6)
        self.codes[code] = (q["redirect_uri"], q["code_challenge"])
        sep = "&" if "?" in q["redirect_uri"] else "?"
        return Reply(302, headers={"Location": f"{q['redirect_uri']}{sep}code={code}&state={q['state']}"})

    def _token(self, req: Request) -> Reply:
        form = req.form
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return Reply.json({"error": "invalid_client"}, status=401)
        grant = form.get("grant_type")
        if grant == "refresh_token":
            if form.get("refresh_token") != self.refresh_token:
                return Reply.json({"error": "invalid_grant", "error_description": "Token already used or revoked"}, status=400)
            self.refreshes += 1
            return Reply.json(self.issue_tokens())
        if grant == "authorization_code":
            issued = self.codes.pop(form.get("code", ""), None)
            if issued is None or issued[0] != form.get("redirect_uri"):
                return Reply.json({"error": "invalid_grant"}, status=400)
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if challenge != issued[1]:
                return Reply.json({"error": "invalid_grant", "error_description": "PKCE verification failed"}, status=400)
            return Reply.json(self.issue_tokens())
        return Reply.json({"error": "unsupported_grant_type"}, status=400)

    def _api(self, req: Request) -> Reply:
        stream = req.path[len(API_PREFIX) + 1:]
        if self.faults.get(stream):
            return self.faults[stream].pop(0)
        if req.bearer not in self.access_tokens | self.personal_tokens:
            return Reply.json({"status": 401, "title": "Invalid or expired authentication token"}, status=401)
        if stream == "personal_info":
            return Reply.json({"id": "8f9a5221-639e-4a85-81cb-4065ef23f979", "age": 31, "weight": 74.8,
                               "height": 1.8, "biological_sex": "female", "email": "jane@example.com"})
        if stream not in self.data:
            return Reply.json({"status": 404, "title": "Not found"}, status=404)
        return self._list(stream, req)

    def _select(self, stream: str, q: dict[str, str]) -> list[dict[str, Any]] | Reply:
        if stream == "heartrate":
            try:
                lo, hi = _parse_dt(q["start_datetime"]), _parse_dt(q["end_datetime"])
            except (KeyError, ValueError):
                return Reply.json({"status": 400, "title": "start_datetime and end_datetime must be ISO 8601"}, status=400)
            if hi - lo > timedelta(days=30):
                return Reply.json({"status": 400, "title": "The time range may be at most 30 days"}, status=400)
            rows = [r for r in self.data["heartrate"] if lo <= _parse_dt(r["timestamp"]) <= hi]
            return sorted(rows, key=lambda r: r["timestamp"])
        try:
            lo_d, hi_d = date.fromisoformat(q["start_date"][:10]), date.fromisoformat(q["end_date"][:10])
        except (KeyError, ValueError):
            return Reply.json({"status": 400, "title": "start_date and end_date must be ISO 8601 dates"}, status=400)
        docs = sorted(self.data[stream], key=lambda d: (d["day"], str(d.get("bedtime_start") or d.get("start_datetime") or "")))
        if stream == "sleep":  # start_date exclusive, end_date inclusive (users' reports)
            return [d for d in docs if lo_d < date.fromisoformat(d["day"]) <= hi_d]
        # a date-only end_date is midnight: that day's document (timestamped later) is left out
        return [d for d in docs if lo_d <= date.fromisoformat(d["day"]) < hi_d]

    def _list(self, stream: str, req: Request) -> Reply:
        q = dict(req.query)
        token = q.pop("next_token", None)
        offset = 0
        if token is not None:
            if self.listings.get(token) != q:
                return Reply.json({"status": 400, "title": "next_token does not match the query"}, status=400)
            offset = json.loads(base64.urlsafe_b64decode(token))["offset"]
        rows = self._select(stream, q)
        if isinstance(rows, Reply):
            return rows
        size = self.page_size[stream]
        page = rows[offset:offset + size]
        next_token = None
        if offset + size < len(rows):
            next_token = base64.urlsafe_b64encode(json.dumps({"offset": offset + size, "n": secrets.token_hex(3)}).encode()).decode()
            self.listings[next_token] = q
        return Reply.json({"data": page, "next_token": next_token})
