"""connectors.oura.api: the Oura v2 documents mapped to records, windows, paging, offsets.

Documents come from tests/connectors/oura_server.py (written from the published schemas),
over varied local offsets (west, east, half-hour, a DST change inside the range)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from common.errors import ApiError, ConfigError
from common.records import METRIC_UNITS, Deletion, RawRecord, Sample, SleepSession, Workout
from connectors.checkpoint import Checkpoint
from connectors.http import ApiClient, RetryPolicy
from connectors.oura import api
from connectors.oura.sync import PersonalToken
from tests.connectors.oura_server import OuraServer, make_days
from tests.loopback import Loopback, Reply, loopback_fixture  # noqa: F401

NOW = datetime(2026, 6, 10, 15, 30, tzinfo=UTC)
TODAY = NOW.date()
OFFSETS = {
    "los_angeles": lambda d: -420,
    "utc": lambda d: 0,
    "kolkata": lambda d: 330,
    "berlin_dst": lambda d: 60 if d < date(2026, 6, 3) else 120,
}


def of(records, cls):
    return [r for r in records if isinstance(r, cls)]


def client_for(server: OuraServer, waits: list[float] | None = None) -> ApiClient:
    policy = RetryPolicy(max_retries=3, sleep=(waits if waits is not None else []).append, jitter=False)
    return ApiClient(server.api_base, name="oura", tokens=PersonalToken(server.pat), policy=policy)


def _local(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


# -- mapping, one document at a time -----------------------------------------------------------
@pytest.mark.parametrize("zone", sorted(OFFSETS))
def test_sleep_periods_map_to_sessions_with_stages_hrv_and_lowest_hr(zone):
    data = make_days(14, TODAY, offset_of=OFFSETS[zone], heart_rate=False, seed=len(zone))
    for doc in data["sleep"]:
        out = list(api.map_sleep(doc, NOW))
        raw, sess = out
        assert raw == RawRecord("oura", "sleep", doc["id"], raw.payload, NOW) and json.loads(raw.payload) == doc
        assert isinstance(sess, SleepSession) and sess.session_id == doc["id"]
        start, end = _local(doc["bedtime_start"]), _local(doc["bedtime_end"])
        assert (sess.start_ts, sess.end_ts) == (start, end)  # the same instants...
        assert sess.start_ts.tzinfo == UTC  # ...stored in UTC
        assert sess.tz_offset_min == end.utcoffset().total_seconds() / 60 == OFFSETS[zone](date.fromisoformat(doc["day"]))
        assert sess.local_day == end.date() == date.fromisoformat(doc["day"])  # the wake-up day
        phases = doc["sleep_phase_5_min"]
        assert sess.deep_min == 5 * phases.count("1") and sess.light_min == 5 * phases.count("2")
        assert sess.rem_min == 5 * phases.count("3") and sess.awake_min == 5 * phases.count("4")
        assert sess.sleep_min == doc["total_sleep_duration"] / 60 == sess.deep_min + sess.light_min + sess.rem_min
        assert sess.in_bed_min == (end - start).total_seconds() / 60
        assert sess.is_nap == (doc["type"] == "sleep")
        assert sess.hrv_rmssd_ms == doc["average_hrv"] and sess.resting_hr_bpm == doc["lowest_heart_rate"]
        assert sess.respiratory_rate_brpm == doc["average_breath"] and sess.efficiency_pct == doc["efficiency"]
        assert sess.score is None  # Oura scores days, not periods


def test_a_nap_without_vitals_keeps_them_missing_not_zero():
    nap = next(d for d in make_days(8, TODAY, heart_rate=False)["sleep"] if d["type"] == "sleep")
    sess = of(api.map_sleep(nap, NOW), SleepSession)[0]
    assert sess.is_nap and sess.hrv_rmssd_ms is None and sess.respiratory_rate_brpm is None
    assert sess.sleep_min == nap["total_sleep_duration"] / 60 > 0


def test_total_sleep_from_stages_when_oura_leaves_it_null():
    doc = make_days(1, TODAY, heart_rate=False)["sleep"][0] | {"total_sleep_duration": None}
    sess = of(api.map_sleep(doc, NOW), SleepSession)[0]
    assert sess.sleep_min == (doc["deep_sleep_duration"] + doc["light_sleep_duration"] + doc["rem_sleep_duration"]) / 60
    doc["rem_sleep_duration"] = None
    assert of(api.map_sleep(doc, NOW), SleepSession)[0].sleep_min is None  # never guessed


@pytest.mark.parametrize("kind", ["deleted", "rest"])
def test_a_deleted_or_rejected_period_is_raw_only_and_removes_the_session(kind):
    doc = make_days(1, TODAY, heart_rate=False)["sleep"][0] | {"type": kind}
    out = list(api.map_sleep(doc, NOW))
    assert [type(r) for r in out] == [RawRecord, Deletion]
    assert out[1] == Deletion("sleep_sessions", {"source": "oura", "session_id": doc["id"]})


@pytest.mark.parametrize("zone", sorted(OFFSETS))
def test_daily_activity_is_a_day_from_04_00_local(zone):
    data = make_days(5, TODAY, offset_of=OFFSETS[zone], heart_rate=False)
    for doc in data["daily_activity"]:
        out = list(api.map_daily_activity(doc, NOW))
        assert out[0].kind == "daily_activity" and out[0].natural_key == doc["day"]
        s = {x.metric: x for x in of(out, Sample)}
        assert (s["steps"].value, s["steps"].unit) == (doc["steps"], "count")
        assert s["active_energy"].value == doc["active_calories"] and s["total_energy"].value == doc["total_calories"]
        assert s["activity_score"].value == doc["score"]
        assert s["intensity_minutes"].value == (doc["medium_activity_time"] + doc["high_activity_time"]) / 60
        day = date.fromisoformat(doc["day"])
        off = OFFSETS[zone](day)
        local_start = datetime(day.year, day.month, day.day, 4, tzinfo=timezone(timedelta(minutes=off)))
        assert all(x.start_ts == local_start and x.end_ts == local_start + timedelta(days=1) for x in s.values())
        assert all(x.local_day == day and x.tz_offset_min == off for x in s.values())


def test_readiness_sleep_score_and_stress_are_day_values():
    data = make_days(3, TODAY, heart_rate=False)
    rd = data["daily_readiness"][0]
    s = {x.metric: x for x in of(api.map_daily_readiness(rd, NOW), Sample)}
    assert s["readiness"].value == rd["score"] and s["readiness"].unit == "score"
    assert s["skin_temp_deviation"].value == rd["temperature_deviation"]
    assert json.loads(s["readiness"].detail)["contributors"] == rd["contributors"]
    ds = data["daily_sleep"][1]
    (score,) = of(api.map_daily_sleep(ds, NOW), Sample)
    assert (score.metric, score.value, score.local_day) == ("sleep_score", ds["score"], date.fromisoformat(ds["day"]))
    st = data["daily_stress"][-1]  # today: recovery_high not known yet (null)
    s = {x.metric: x for x in of(api.map_daily_stress(st, NOW), Sample)}
    assert s["high_stress_time"].value == st["stress_high"] / 60 and "high_recovery_time" not in s
    assert json.loads(s["high_stress_time"].detail) == {"day_summary": st["day_summary"]}
    # no timestamp in daily_stress: the day's UTC midnight, offset unknown
    assert s["high_stress_time"].start_ts == datetime.combine(TODAY, datetime.min.time(), UTC)
    assert s["high_stress_time"].tz_offset_min is None


def test_a_null_score_is_missing_not_zero():
    rd = make_days(1, TODAY, heart_rate=False)["daily_readiness"][0] | {"score": None, "temperature_deviation": None}
    assert [type(r) for r in api.map_daily_readiness(rd, NOW)] == [RawRecord]


def test_workouts_keep_kcal_metres_and_local_offset():
    data = make_days(9, TODAY, offset_of=OFFSETS["kolkata"], heart_rate=False)
    for doc in data["workout"]:
        raw, w = list(api.map_workout(doc, NOW))
        assert isinstance(w, Workout) and raw.kind == "workout" and w.workout_id == doc["id"]
        assert w.sport == doc["activity"] and w.energy_kcal == doc["calories"] and w.distance_m == doc["distance"]
        assert w.duration_min == (_local(doc["end_datetime"]) - _local(doc["start_datetime"])).total_seconds() / 60
        assert w.tz_offset_min == 330 and w.local_day == date.fromisoformat(doc["day"])
        assert w.avg_hr_bpm is None and w.strain is None


def test_every_metric_is_in_the_vocabulary_with_its_unit(loopback):
    server = OuraServer(loopback, make_days(6, TODAY))
    with client_for(server) as c:
        out = list(api.fetch(api.plan({}, NOW, history_days=30, lag_days=2), c, now=NOW))
    metrics = {(s.metric, s.unit) for s in of(out, Sample)}
    assert {m for m, _ in metrics} >= {"heart_rate", "steps", "readiness", "sleep_score", "high_stress_time"}
    assert all(METRIC_UNITS.get(m) == u for m, u in metrics), metrics


@pytest.mark.parametrize(("doc", "message"), [
    ({"id": "x", "score": 80}, "daily_sleep record came without day"),
    ({"id": "x", "day": "yesterday"}, "unreadable day"),
])
def test_a_document_without_its_day_is_one_clear_error(doc, message):
    with pytest.raises(ApiError, match=message):
        list(api.map_daily_sleep(doc, NOW))


# -- windows ------------------------------------------------------------------------------------
def test_first_sync_reaches_back_the_whole_history_and_a_day_past_today():
    w = api.plan({}, NOW, history_days=730, lag_days=2)
    assert w["daily_sleep"] == api.Window(TODAY - timedelta(days=731), TODAY + timedelta(days=2))
    assert w["heartrate"] == api.Window(datetime(2024, 6, 10, tzinfo=UTC), NOW)  # from a UTC midnight


def test_later_syncs_refetch_the_lag_window_including_yesterday_and_today():
    cursors = {"sleep": "2026-06-10", "daily_activity": "2026-06-04", "heartrate": "2026-06-10T14:55:01+00:00"}
    w = api.plan(cursors, NOW, history_days=730, lag_days=2)
    assert w["sleep"].start == date(2026, 6, 7)  # cursor - 2 days, minus the exclusive-start day
    assert w["sleep"].end == date(2026, 6, 12)
    assert w["daily_activity"].start == date(2026, 6, 1)  # an older cursor: from there on
    assert w["heartrate"] == api.Window(datetime(2026, 6, 8, tzinfo=UTC), NOW)
    future = api.plan({"sleep": "2026-06-30"}, NOW, history_days=730, lag_days=2)
    assert future["sleep"].start == date(2026, 6, 7)  # a cursor past today still re-fetches yesterday


@pytest.mark.parametrize("bad", [{"lag_days": 0, "history_days": 30}, {"lag_days": 2, "history_days": 0}])
def test_windows_refuse_settings_that_would_skip_data(bad):
    with pytest.raises(ConfigError, match="oura_"):
        api.plan({}, NOW, **bad)


# -- fetching over the protocol -------------------------------------------------------------------
def test_paging_uses_next_token_with_the_same_dates(loopback):
    server = OuraServer(loopback, make_days(25, TODAY, heart_rate=False))
    window = api.plan({}, NOW, history_days=60, lag_days=2)["daily_readiness"]
    with client_for(server) as c:
        out = list(api.fetch_dated("daily_readiness", window, c, fetched_at=NOW, offsets=api.Offsets()))
    calls = server.calls("daily_readiness")
    assert len(calls) == 3
    assert [r.query.get("next_token") is None for r in calls] == [True, False, False]
    assert {(r.query["start_date"], r.query["end_date"]) for r in calls} == {("2026-04-10", "2026-06-12")}
    raws = of(out, RawRecord)
    assert len(raws) == 25 == len({r.natural_key for r in raws})
    assert out[-1] == Checkpoint("oura", "daily_readiness", TODAY.isoformat())


def test_the_window_edges_survive_oura_date_filters(loopback):
    """The server drops the start day of `sleep` and the end day of the daily collections
    (as Oura does); the padded window still brings every day from the cursor on."""
    server = OuraServer(loopback, make_days(10, TODAY, heart_rate=False))
    cursors = dict.fromkeys(api.DAILY_STREAMS + ("sleep",), (TODAY - timedelta(days=3)).isoformat())
    with client_for(server) as c:
        out = list(api.fetch(api.plan(cursors, NOW, history_days=30, lag_days=2), c, now=NOW,
                             streams=("sleep", "daily_activity")))
    days = {s.local_day for s in of(out, Sample) if s.metric == "steps"}
    assert days >= {TODAY - timedelta(days=5) + timedelta(days=i) for i in range(6)}  # cursor-2 .. today
    nights = {s.local_day for s in of(out, SleepSession) if not s.is_nap}
    assert nights >= {TODAY - timedelta(days=5) + timedelta(days=i) for i in range(6)}


def test_heart_rate_in_30_day_windows_one_document_per_utc_day(loopback):
    server = OuraServer(loopback, make_days(65, TODAY, offset_of=OFFSETS["los_angeles"]))
    server.page_size["heartrate"] = 2000
    window = api.plan({}, NOW, history_days=66, lag_days=2)["heartrate"]
    with client_for(server) as c:
        out = list(api.fetch_heartrate(window, c, fetched_at=NOW, offsets=api.Offsets()))
    calls = server.calls("heartrate")
    spans = [(datetime.fromisoformat(r.query["start_datetime"]), datetime.fromisoformat(r.query["end_datetime"]))
             for r in calls if "next_token" not in r.query]
    assert len(spans) == 3 and all(b - a <= timedelta(days=30) for a, b in spans)
    assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))  # contiguous
    samples = of(out, Sample)
    expected = [r for r in server.data["heartrate"] if datetime.fromisoformat(r["timestamp"]) <= NOW]
    assert len(samples) == len(expected) == len({s.start_ts for s in samples})  # none twice, none lost
    raws = of(out, RawRecord)
    assert len(raws) == 65 and all(len(json.loads(r.payload)["data"]) == 288 for r in raws[:-1])
    assert out[-1] == Checkpoint("oura", "heartrate", max(r["timestamp"] for r in expected))


def test_heart_rate_borrows_the_ring_offset_of_nearby_records(loopback):
    server = OuraServer(loopback, make_days(4, TODAY, offset_of=OFFSETS["los_angeles"]))
    with client_for(server) as c:
        out = list(api.fetch(api.plan({}, NOW, history_days=10, lag_days=2), c, now=NOW))
    hr = [s for s in of(out, Sample) if s.metric == "heart_rate"]
    assert all(s.tz_offset_min == -420 for s in hr)
    late = next(s for s in hr if s.start_ts.hour == 3)  # 03:xx UTC is 20:xx the evening before
    assert late.local_day == late.start_ts.date() - timedelta(days=1)
    assert {s.detail for s in hr} <= {"sleep", "awake", "rest"}


def test_heart_rate_alone_uses_the_person_zone_and_no_offset(loopback):
    server = OuraServer(loopback, make_days(2, TODAY, offset_of=OFFSETS["kolkata"]))
    with client_for(server) as c:
        out = list(api.fetch(api.plan({}, NOW, history_days=5, lag_days=2), c, now=NOW,
                             zone=ZoneInfo("Asia/Tokyo"), streams=("heartrate",)))
    hr = [s for s in of(out, Sample) if s.metric == "heart_rate"]
    assert hr and all(s.tz_offset_min is None for s in hr)  # not guessed: the zone decides later
    assert all(s.local_day == s.start_ts.astimezone(ZoneInfo("Asia/Tokyo")).date() for s in hr)


def test_an_empty_stream_keeps_its_cursor(loopback):
    server = OuraServer(loopback, make_days(3, TODAY, heart_rate=False, workout_every=0))
    with client_for(server) as c:
        out = list(api.fetch(api.plan({}, NOW, history_days=5, lag_days=2), c, now=NOW, streams=("workout",)))
    assert out == [Checkpoint("oura", "workout", None)]


def test_a_repeated_page_token_is_refused(loopback):
    loopback.route("GET", "/v2/usercollection/daily_stress", Reply.json({"data": [], "next_token": "same"}))
    with ApiClient(loopback.url, name="oura", policy=RetryPolicy(sleep=lambda s: None)) as c, \
            pytest.raises(ApiError, match="repeated a page token"):
        list(api.fetch_dated("daily_stress", api.Window(TODAY, TODAY), c, fetched_at=NOW, offsets=api.Offsets()))


def test_an_unexpected_body_is_one_clear_error(loopback):
    loopback.route("GET", "/v2/usercollection/sleep", Reply.json({"data": {"oops": 1}}))
    with ApiClient(loopback.url, name="oura", policy=RetryPolicy(sleep=lambda s: None)) as c, \
            pytest.raises(ApiError, match="unexpected shape"):
        list(api.fetch_dated("sleep", api.Window(TODAY, TODAY), c, fetched_at=NOW, offsets=api.Offsets()))


def test_429_waits_what_retry_after_says_and_5xx_backs_off(loopback):
    server = OuraServer(loopback, make_days(3, TODAY, heart_rate=False))
    server.faults["daily_activity"] = [Reply.json({"status": 429}, status=429, headers={"Retry-After": "7"}),
                                       Reply(503), Reply(502)]
    waits: list[float] = []
    with client_for(server, waits) as c:
        out = list(api.fetch(api.plan({}, NOW, history_days=5, lag_days=2), c, now=NOW, streams=("daily_activity",)))
    assert waits == [7.0, 1.0, 2.0]  # Retry-After, then exponential backoff (no jitter here)
    assert len([s for s in of(out, Sample) if s.metric == "steps"]) == 3
