"""connectors.garmin.live: the garth cassette bodies (real Garmin Connect responses).

garminconnect itself builds its URLs from a hard-coded https://connectapi.<domain>, so it
cannot be pointed at a plain-HTTP loopback server. The HTTP part is tested instead with the
project's ApiClient replaying the cassettes on 127.0.0.1 at the recorded paths (including
the empty-body HRV day); the garminconnect adapter is checked with a stand-in object.
"""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, date, datetime
from urllib.parse import urlsplit

import pytest
import yaml

from common.errors import AuthError, RhythmError
from common.records import RawRecord, Sample, SleepSession
from connectors.checkpoint import Checkpoint
from connectors.garmin import live
from connectors.http import ApiClient, RetryPolicy
from tests.loopback import Loopback, Reply, loopback_fixture  # noqa: F401

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def cassette(fixtures_dir, name: str) -> list[tuple[str, dict, int, str]]:
    doc = yaml.safe_load((fixtures_dir / "garmin_connect_json" / name).read_text())
    out = []
    for it in doc["interactions"]:
        u = urlsplit(it["request"]["uri"])
        query = dict(p.split("=", 1) for p in u.query.split("&") if p)
        out.append((u.path, query, it["response"]["status"]["code"], it["response"]["body"]["string"]))
    return out


def body(fixtures_dir, name: str, index: int = 0):
    text = cassette(fixtures_dir, name)[index][3]
    return json.loads(text) if text else None


def of(records, cls):
    return [r for r in records if isinstance(r, cls)]


def test_sleep_cassette(fixtures_dir):
    b = body(fixtures_dir, "garth_test_daily_sleep_data_get.yaml")
    out = list(live.map_day("sleep", b, date(2025, 7, 7), NOW))
    raw = of(out, RawRecord)[0]
    assert raw.kind == "connect_sleep" and raw.natural_key == "2025-07-07"
    s = of(out, SleepSession)[0]
    assert s.session_id == "night:2025-07-07" and s.local_day == date(2025, 7, 7)
    assert s.deep_min == 88.0 and s.light_min == 224.0 and s.rem_min == 91.0 and s.awake_min == 7.0
    assert s.sleep_min == pytest.approx(403.0)  # deep + light + REM = sleepTimeSeconds / 60
    assert s.score == 83 and s.respiratory_rate_brpm == 13.0 and s.resting_hr_bpm == 44
    assert s.start_ts == datetime.fromtimestamp(1751863648, tz=UTC)
    assert s.tz_offset_min == -360  # Local - GMT
    extras = {x.metric: x.value for x in of(out, Sample)}
    assert extras == {"spo2": 93.0, "skin_temp_deviation": -0.4}


def test_no_data_sleep_day_gives_nothing_but_raw(fixtures_dir):
    b = body(fixtures_dir, "garth_test_daily_sleep_data_get.yaml", 1)
    out = list(live.map_day("sleep", b, date(2030, 1, 1), NOW))
    assert [type(r) for r in out] == [RawRecord]


def test_hrv_cassette_and_its_empty_body_day(fixtures_dir):
    b = body(fixtures_dir, "garth_test_hrv_data_get.yaml")
    out = list(live.map_day("hrv", b, date(2023, 7, 20), NOW))
    (hrv,) = of(out, Sample)
    assert hrv.metric == "hrv_rmssd" and hrv.value == 42 and hrv.unit == "ms"
    assert hrv.start_ts == datetime(2023, 7, 20, 5, 29, 48, tzinfo=UTC)
    assert hrv.tz_offset_min == -360
    assert json.loads(hrv.detail)["status"] == "BALANCED"
    empty = cassette(fixtures_dir, "garth_test_hrv_data_get.yaml")[1]
    assert empty[2] == 204 and empty[3] == ""
    assert list(live.map_day("hrv", None, date(2021, 7, 20), NOW)) == []


def test_daily_summary_cassette(fixtures_dir):
    b = body(fixtures_dir, "garth_test_daily_summary_get.yaml", 2)
    out = {s.metric: s for s in of(live.map_day("summary", b, date(2025, 6, 14), NOW), Sample)}
    assert out["steps"].value == 5459 and out["active_energy"].value == 99.0
    assert out["basal_energy"].value == 2153.0 and out["resting_heart_rate"].value == 51
    assert out["stress"].value == 24 and out["distance"].value == 4471
    assert out["steps"].start_ts == datetime(2025, 6, 13, 22, tzinfo=UTC)
    assert out["steps"].tz_offset_min == 120
    assert all(s.local_day == date(2025, 6, 14) for s in out.values())


def test_stress_and_body_battery_cassette(fixtures_dir):
    b = body(fixtures_dir, "garth_test_daily_body_battery_stress_get.yaml")
    samples = of(live.map_day("stress", b, date(2023, 7, 20), NOW), Sample)
    stress = [s for s in samples if s.metric == "stress"]
    bb = [s for s in samples if s.metric == "body_battery"]
    assert len(stress) == 10 and len(bb) == 11
    assert stress[0].value == 12 and bb[0].value == 45 and bb[0].detail == "charging"
    assert stress[0].tz_offset_min == -420


def test_heart_rate_cassette(fixtures_dir):
    b = body(fixtures_dir, "garth_test_daily_heart_rate_get.yaml")
    hr = of(live.map_day("heart_rate", b, date(2026, 1, 7), NOW), Sample)
    expected = [v for v in b["heartRateValues"] if v[1] is not None]
    assert len(hr) == len(expected) > 100
    assert hr[0].value == 63 and hr[0].start_ts == datetime.fromtimestamp(1767765600, tz=UTC)


def test_days_to_fetch():
    today = date(2026, 6, 10)
    assert live.days_to_fetch(None, today, 3) == [date(2026, 6, 8), date(2026, 6, 9), today]
    assert live.days_to_fetch("2026-06-09", today, 7, lag_days=2)[0] == date(2026, 6, 7)
    assert live.days_to_fetch("2026-06-10", today, 7, lag_days=0) == [today]


def test_fetch_over_loopback_replaying_the_cassettes(fixtures_dir, loopback: Loopback):
    served = {}
    for name in ("garth_test_hrv_data_get.yaml", "garth_test_daily_sleep_data_get.yaml",
                 "garth_test_daily_summary_get.yaml", "garth_test_daily_body_battery_stress_get.yaml",
                 "garth_test_daily_heart_rate_get.yaml"):
        for path, query, status, text in cassette(fixtures_dir, name):
            served[(path, tuple(sorted(query.items())))] = (status, text)

    def replay(req):
        key = (req.path, tuple(sorted(req.query.items())))
        if key not in served:
            return Reply.empty(204)  # a day Garmin has nothing for
        status, text = served[key]
        return Reply(status, text.encode(), {"Content-Type": "application/json"} if text else {})

    loopback.route("GET", "^/.*$", replay)
    days = [date(2023, 7, 20)]
    with ApiClient(loopback.url, name="garmin", policy=RetryPolicy(sleep=lambda s: None)) as c:
        out = list(live.fetch(days, c, now=NOW))
    kinds = sorted(r.kind for r in of(out, RawRecord))
    assert kinds == ["connect_hrv", "connect_stress"]  # the other endpoints: no data that day
    assert out[-1] == Checkpoint("garmin", "daily", "2023-07-20")
    assert {s.metric for s in of(out, Sample)} == {"hrv_rmssd", "stress", "body_battery"}


class FakeGarmin:
    """Stands in for garminconnect.Garmin: `connectapi(path, params=...)` returns JSON."""

    def __init__(self, bodies):
        self.bodies = bodies
        self.calls = []

    def connectapi(self, path, **kwargs):
        self.calls.append((path, kwargs))
        return self.bodies.get(path, {})


def test_garminconnect_adapter_maps_204_to_no_data(monkeypatch):
    fake_gc = type("gc", (), {
        "GarminConnectTooManyRequestsError": type("T", (Exception,), {}),
        "GarminConnectAuthenticationError": type("A", (Exception,), {}),
        "GarminConnectConnectionError": type("C", (Exception,), {}),
    })
    monkeypatch.setattr(live, "_garminconnect", lambda: fake_gc)
    g = FakeGarmin({"/hrv-service/hrv/2023-07-20": {"hrvSummary": {"lastNightAvg": 40}}})
    c = live.GarminConnectClient(g, policy=RetryPolicy(sleep=lambda s: None))
    assert c.get_json("/hrv-service/hrv/2023-07-20") == {"hrvSummary": {"lastNightAvg": 40}}
    assert c.get_json("/hrv-service/hrv/2021-07-20") is None  # garminconnect turns 204 into {}
    assert c.get_json("/x", {"date": "2023-07-20"}) is None
    assert g.calls[-1] == ("/x", {"params": {"date": "2023-07-20"}})


def test_missing_optional_dependency_says_how_to_install(tmp_path):
    try:
        import garminconnect  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("garminconnect is installed here")
    (tmp_path / "garmin").mkdir()
    (tmp_path / "garmin" / "garmin_tokens.json").write_text("{}")
    with pytest.raises(RhythmError, match=r"pip install 'rhythm\[garmin\]'"):
        live.open_client(tmp_path / "garmin")


def test_not_logged_in(tmp_path, monkeypatch):
    monkeypatch.setattr(live, "_garminconnect", lambda: object())
    with pytest.raises(AuthError, match="rhythm auth garmin"):
        live.open_client(tmp_path / "garmin")


class TokenWritingGarmin:
    """Stands in for garminconnect.Garmin: logging in, dumping and a refresh during a call
    write token files with plain open() (as the library does), noting each file's mode at
    the moment it was created, before its first byte."""

    created: list[tuple[str, int]] = []

    def __init__(self, *args, **kwargs):
        self.client = self
        self.tokenstore = None

    def _write(self, name: str) -> None:
        path = os.path.join(self.tokenstore, name)
        with open(path, "w") as fh:
            TokenWritingGarmin.created.append((name, stat.S_IMODE(os.fstat(fh.fileno()).st_mode)))
            fh.write('{"token": "secret"}')

    def login(self, tokenstore=None):
        self.tokenstore = tokenstore
        self._write("oauth1_token.json")

    def dump(self, path):
        self._write("oauth2_token.json")

    def connectapi(self, path, **kwargs):
        self._write("oauth2_token.json")  # a refresh written back mid-sync
        return {"ok": True}


def test_garmin_tokens_are_0600_from_their_first_byte(tmp_path, monkeypatch):
    fake_gc = type("gc", (), {
        "Garmin": TokenWritingGarmin,
        "GarminConnectTooManyRequestsError": type("T", (Exception,), {}),
        "GarminConnectAuthenticationError": type("A", (Exception,), {}),
        "GarminConnectConnectionError": type("C", (Exception,), {}),
    })
    monkeypatch.setattr(live, "_garminconnect", lambda: fake_gc)
    TokenWritingGarmin.created = []
    token_dir = tmp_path / "tokens" / "garmin"
    old = os.umask(0o022)
    try:
        live.login(token_dir, "me@example.org", "pw")
        (token_dir / "old_token.json").write_text("{}")  # left world-readable by an older version
        os.chmod(token_dir / "old_token.json", 0o644)
        client = live.open_client(token_dir, policy=RetryPolicy(sleep=lambda s: None))
        assert client.get_json("/x") == {"ok": True}
        assert os.umask(0o022) == 0o022  # the process umask is given back
    finally:
        os.umask(old)
    assert TokenWritingGarmin.created and all(mode == 0o600 for _, mode in TokenWritingGarmin.created)
    assert stat.S_IMODE(token_dir.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in token_dir.iterdir())
