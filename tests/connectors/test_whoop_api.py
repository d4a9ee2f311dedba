"""connectors.whoop.api: mapping of the WHOOP v2 payloads, paging, cursors, PENDING_SCORE."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest

from common.errors import ApiError
from common.records import RawRecord, Sample, Skipped, SleepSession, Workout
from connectors.checkpoint import Checkpoint
from connectors.http import ApiClient, RetryPolicy
from connectors.whoop import api
from tests.connectors.whoop_server import (
    WhoopServer,
    make_days,
    recovery_template,
    sleep_template,
    workout_template,
)
from tests.loopback import Loopback, Reply, loopback_fixture  # noqa: F401

NOW = datetime(2026, 6, 1, tzinfo=UTC)


class StaticTokens:
    def __init__(self, token: str):
        self.token = token

    def access_token(self) -> str:
        return self.token

    def refresh(self) -> str:
        return self.token


def client_for(ws: WhoopServer, waits: list[float] | None = None) -> ApiClient:
    tok = ws.issue_tokens()
    policy = RetryPolicy(max_retries=3, sleep=(waits if waits is not None else []).append, jitter=False)
    return ApiClient(ws.api_base, name="whoop", tokens=StaticTokens(tok["access_token"]), policy=policy)


def of(records, cls):
    return [r for r in records if isinstance(r, cls)]


def test_sleep_example_maps_to_minutes_local_wake_day_and_offset():
    rec = sleep_template()  # lab/people/whoop.py, the documentation's shape
    score, stages = rec["score"], rec["score"]["stage_summary"]
    out = list(api.map_sleep(rec, NOW))
    raw, sess = out
    assert raw == RawRecord("whoop", "sleep", rec["id"], raw.payload, NOW)
    assert json.loads(raw.payload)["score"]["respiratory_rate"] == score["respiratory_rate"]
    assert isinstance(sess, SleepSession)
    minutes = {k: v / 60000 for k, v in stages.items() if k.endswith("_milli")}
    assert sess.in_bed_min == pytest.approx(minutes["total_in_bed_time_milli"]) == 468
    assert sess.awake_min == pytest.approx(minutes["total_awake_time_milli"]) == 27
    assert sess.sleep_min == pytest.approx(468 - 27 - minutes["total_no_data_time_milli"])
    assert sess.deep_min == pytest.approx(minutes["total_slow_wave_sleep_time_milli"])
    assert sess.rem_min == pytest.approx(minutes["total_rem_sleep_time_milli"])
    assert sess.light_min == pytest.approx(minutes["total_light_sleep_time_milli"])
    assert sess.efficiency_pct == score["sleep_efficiency_percentage"]
    assert sess.score == score["sleep_performance_percentage"]
    assert sess.tz_offset_min == -240
    # fell asleep 23:41 UTC on 13 April (19:41 local), woke 07:29 UTC on the 14th = 03:29 local (-04:00)
    assert sess.start_ts == datetime(2026, 4, 13, 23, 41, tzinfo=UTC)
    assert sess.end_ts == datetime(2026, 4, 14, 7, 29, tzinfo=UTC)
    assert sess.local_day == date(2026, 4, 14)


def test_workout_example_converts_kilojoules_to_kcal():
    rec = workout_template()
    score = rec["score"]
    (raw, w) = list(api.map_workout(rec, NOW))
    assert isinstance(w, Workout) and raw.kind == "workout"
    assert w.energy_kcal == pytest.approx(score["kilojoule"] / 4.184)
    assert w.sport == rec["sport_name"] and w.distance_m == score["distance_meter"]
    assert (w.avg_hr_bpm, w.max_hr_bpm) == (score["average_heart_rate"], score["max_heart_rate"])
    assert w.strain == pytest.approx(score["strain"])
    # 13:05:00 -> 13:53:37 UTC (09:05 local, -04:00)
    assert w.duration_min == pytest.approx(48 + 37 / 60)
    assert w.local_day == date(2026, 4, 12) and w.tz_offset_min == -240


def test_recovery_samples_sit_at_the_wake_up_of_their_sleep():
    rec, sleep = recovery_template(), sleep_template()
    score = rec["score"]
    out = list(api.map_recovery(rec, sleep, NOW))
    assert out[0].kind == "recovery" and out[0].natural_key == str(rec["cycle_id"])
    samples = {s.metric: s for s in of(out, Sample)}
    assert samples["recovery"].value == score["recovery_score"] and samples["recovery"].unit == "pct"
    assert samples["hrv_rmssd"].value == score["hrv_rmssd_milli"] and samples["hrv_rmssd"].unit == "ms"
    assert samples["resting_heart_rate"].value == score["resting_heart_rate"]
    assert samples["spo2"].value == score["spo2_percentage"]
    assert samples["skin_temp"].value == score["skin_temp_celsius"]
    woke = datetime(2026, 4, 14, 7, 29, tzinfo=UTC)  # the sleep's end
    assert all(s.start_ts == s.end_ts == woke for s in samples.values())
    assert all(s.local_day == date(2026, 4, 14) and s.tz_offset_min == -240 for s in samples.values())


def test_pending_score_lands_raw_with_scores_none():
    sleep = {k: v for k, v in sleep_template().items() if k != "score"} | {"score_state": "PENDING_SCORE"}
    rec = {k: v for k, v in recovery_template().items() if k != "score"} | {"score_state": "PENDING_SCORE"}
    sess = of(api.map_sleep(sleep, NOW), SleepSession)[0]
    assert sess.sleep_min is None and sess.score is None and sess.in_bed_min is None
    out = list(api.map_recovery(rec, sleep, NOW))
    samples = of(out, Sample)
    assert [(s.metric, s.value) for s in samples] == [("recovery", None)]  # never 0
    assert json.loads(samples[0].detail)["score_state"] == "PENDING_SCORE"
    w = workout_template() | {"score_state": "PENDING_SCORE"}
    w.pop("score")
    wo = of(api.map_workout(w, NOW), Workout)[0]
    assert wo.energy_kcal is None and wo.strain is None and wo.duration_min is not None


def test_open_cycle_is_raw_only():
    cyc = {"id": 1, "start": "2026-05-25T03:00:00.000Z", "end": None, "timezone_offset": "Z", "score_state": "SCORED", "score": {"strain": 3.0}}
    out = list(api.map_cycle(cyc, NOW))
    assert [type(r) for r in out] == [RawRecord]


def test_cycle_day_is_the_day_it_mostly_covers():
    cyc = {"id": 7, "start": "2026-05-24T23:30:00.000Z", "end": "2026-05-26T00:10:00.000Z", "timezone_offset": "-04:00", "score_state": "SCORED", "score": {"strain": 14.2, "kilojoule": 8368.0}}
    s = of(api.map_cycle(cyc, NOW), Sample)[0]
    assert s.metric == "strain" and s.value == 14.2
    assert s.local_day == date(2026, 5, 25)  # fell asleep 19:30 local on the 24th
    assert json.loads(s.detail)["energy_kcal"] == pytest.approx(2000.0)


def test_offsets():
    assert api.parse_offset("-04:00") == -240
    assert api.parse_offset("+05:30") == 330
    assert api.parse_offset("Z") == 0
    assert api.parse_offset(None) is None


def test_paging_60_cycles_uses_next_token_and_the_same_window(loopback: Loopback):
    data = make_days(60, datetime(2026, 3, 1, 3, tzinfo=UTC))
    ws = WhoopServer(loopback, data)
    since = datetime(2026, 2, 1, tzinfo=UTC)
    with client_for(ws) as c:
        out = list(api.fetch_stream("cycle", since, c, fetched_at=NOW))
    calls = loopback.calls("GET", "/developer/v2/cycle")
    assert len(calls) == 3
    assert [r.query.get("nextToken") is None for r in calls] == [True, False, False]
    assert {(r.query["start"], r.query["limit"]) for r in calls} == {("2026-02-01T00:00:00.000Z", "25")}
    raws = of(out, RawRecord)
    assert len(raws) == 60 and len({r.natural_key for r in raws}) == 60
    assert out[-1] == Checkpoint("whoop", "cycle", "2026-04-29T03:00:00.000Z")  # newest start


def test_cursor_stops_at_the_oldest_pending_record(loopback: Loopback):
    data = make_days(5, datetime(2026, 5, 1, 3, tzinfo=UTC), pending_last=True)
    data["sleep"][1]["score_state"] = "PENDING_SCORE"  # an older one still pending too
    data["sleep"][1].pop("score")
    ws = WhoopServer(loopback, data)
    with client_for(ws) as c:
        out = list(api.fetch(dict.fromkeys(api.STREAMS), c, now=NOW))
    cps = {r.stream: r.cursor for r in out if isinstance(r, Checkpoint)}
    assert cps["sleep"] == "2026-05-02T03:00:00.000Z"  # the older pending sleep's start
    assert cps["cycle"] == "2026-05-05T03:00:00.000Z"
    assert cps["recovery"] == "2026-05-05T10:33:00.000Z"  # pending recovery's created_at
    assert cps["profile"] is None
    assert of(out, RawRecord)[-1].kind == "profile"


def test_recovery_fetches_its_sleep_when_outside_the_window(loopback: Loopback):
    data = make_days(2, datetime(2026, 5, 1, 3, tzinfo=UTC))
    ws = WhoopServer(loopback, data)
    with client_for(ws) as c:
        out = list(api.fetch_stream("recovery", None, c, fetched_at=NOW))
    assert len(loopback.calls(path=f"/developer/v2/activity/sleep/{data['sleep'][0]['id']}")) == 1
    rec = [s for s in of(out, Sample) if s.metric == "recovery"]
    assert len(rec) == 2 and all(s.value is not None for s in rec)


def test_repeated_page_token_is_refused(loopback: Loopback):
    loopback.route("GET", "/developer/v2/cycle", Reply.json({"records": [], "next_token": "same"}))
    ws_client = ApiClient(loopback.url + "/developer", name="whoop", policy=RetryPolicy(sleep=lambda s: None))
    with ws_client as c, pytest.raises(Exception, match="repeated a page token"):
        list(api.fetch_stream("cycle", None, c, fetched_at=NOW))


def test_first_sync_sends_no_start(loopback: Loopback):
    ws = WhoopServer(loopback, make_days(1, NOW - timedelta(days=3)))
    with client_for(ws) as c:
        list(api.fetch_stream("workout", None, c, fetched_at=NOW))
    assert "start" not in loopback.calls("GET", "/developer/v2/activity/workout")[0].query


def test_offsets_beyond_any_real_zone_are_unknown():
    assert api.parse_offset("+25:00") is None and api.parse_offset("-19:00") is None
    assert api.parse_offset("+14:00") == 840 and api.parse_offset("+05:75") is None


def test_a_body_cut_mid_response_is_retried_and_then_named(loopback: Loopback):
    data = make_days(3, datetime(2026, 5, 1, 3, tzinfo=UTC))
    ws = WhoopServer(loopback, data)
    page = Reply.json({"records": data["cycle"], "next_token": None})
    ws.faults["/v2/cycle"] = [Reply.cut(page, len(page.body) // 2)]
    waits: list[float] = []
    with client_for(ws, waits) as c:
        out = list(api.fetch_stream("cycle", None, c, fetched_at=NOW))
    assert len(of(out, RawRecord)) == 3 and len(waits) == 1  # one retry, then the whole page
    ws.faults["/v2/cycle"] = [Reply.cut(page, 9)] * 10
    with client_for(ws) as c, pytest.raises(ApiError) as err:
        list(api.fetch_stream("cycle", None, c, fetched_at=NOW))
    assert "connection dropped mid-response after 3 retries" in str(err.value)
    assert "could not connect" not in str(err.value)


def test_records_that_cannot_be_stored_are_skipped_counted_and_keep_the_cursor_sane(loopback: Loopback):
    data = make_days(3, datetime(2026, 5, 1, 3, tzinfo=UTC))
    far = dict(data["cycle"][0], id=1, start="9999-12-30T03:00:00.000Z", end="9999-12-31T03:00:00.000Z")
    early = dict(data["cycle"][0], id=2, start="0001-01-01T00:00:00.000+14:00", end="0001-01-02T00:00:00.000Z")
    odd_zone = dict(data["cycle"][1], id=3, timezone_offset="+25:00")
    no_id = {k: v for k, v in data["cycle"][2].items() if k != "id"}
    backwards = dict(data["cycle"][2], id=4, start="2026-05-10T03:00:00.000Z", end="2026-05-09T03:00:00.000Z")
    records = [far, early, odd_zone, no_id, backwards]
    text = json.dumps({"records": records, "next_token": None})
    nan = dict(data["cycle"][2], id=5)
    text = text.replace(']', ', ' + json.dumps(nan).replace('"strain": 12.0', '"strain": NaN') + ']', 1)
    loopback.route("GET", "/developer/v2/cycle", Reply(200, text.encode(), {"Content-Type": "application/json"}))
    ws_client = ApiClient(loopback.url + "/developer", name="whoop", policy=RetryPolicy(sleep=lambda s: None))
    with ws_client as c:
        out = list(api.fetch({"cycle": None}, c, streams=("cycle",), now=NOW))
    kept = of(out, Sample)
    assert [json.loads(s.detail)["cycle_id"] for s in kept] == [3]
    assert kept[0].tz_offset_min is None  # an impossible offset is not a zone
    skipped = Counter(s.reason for s in of(out, Skipped))
    assert skipped == {"timestamp outside 1900-01-01 .. 2100-12-31": 2, "unreadable record": 1,
                       "end before start": 1, "NaN or infinite value": 1}
    cursor = of(out, Checkpoint)[0].cursor
    assert cursor is not None and cursor.startswith("2026-05-")  # never year 9999
