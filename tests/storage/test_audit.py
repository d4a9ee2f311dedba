"""storage.audit: the plain reads that judge stored plans (lab/plan_check.py)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from common.records import Event, Sample, SleepSession
from storage import audit, open_db, write_records

TZ = timezone(timedelta(hours=-5))
DAY = date(2025, 3, 4)


def at(h: float, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=TZ) + timedelta(hours=h)


def test_the_reads_give_back_what_was_stored(tmp_path):
    recs = [
        SleepSession("whoop", "s1", at(-1), at(7), DAY, sleep_min=450.0, tz_offset_min=-300),
        SleepSession("whoop", "n1", at(14), at(14.5), DAY, sleep_min=25.0, is_nap=True, tz_offset_min=-300),
        Sample("whoop", "hrv_rmssd", at(7), at(7), 50.0, "ms", DAY, tz_offset_min=-300),
        Sample("whoop", "steps", at(9), at(10), 400.0, "count", DAY, tz_offset_min=-300),
        Sample("whoop", "steps", at(10), at(11), 600.0, "count", DAY, tz_offset_min=-300),
        Event("calendar", "primary", "e1", at(19), at(19) + timedelta(hours=13), False, DAY, title="Guardia"),
        Event("calendar", "primary", "e2", at(12), at(13), False, DAY, title="maybe gym?", transparency="transparent"),
    ]
    with open_db(tmp_path / "r.duckdb") as db:
        write_records(db, recs)
        sleeps = audit.main_sleeps_merged(db)
        assert len(sleeps) == 1 and sleeps[0][2] == 450.0  # the nap is no main sleep
        assert audit.daily_sample(db, "hrv_rmssd") == {DAY: 50.0}
        assert audit.daily_sample(db, "steps", "sum") == {DAY: 1000.0}
        held = audit.events_overlapping(db, at(18), at(20))
        assert [(r[3], r[5]) for r in held] == [("Guardia", None)]
        assert len(audit.events_overlapping(db, at(11), at(20))) == 2
        assert audit.latest_plan(db, DAY) == []
        assert audit.slot_action_days(db, "ADMIN_WORK", DAY, DAY) == set()


def test_the_recommend_run_and_the_blocks_models_and_slot_actions_read_back(tmp_path):
    from datetime import UTC

    from storage import plans, runs
    from storage.derived import replace_mapped

    created = datetime(2025, 3, 4, 11, tzinfo=UTC)
    with open_db(tmp_path / "r.duckdb") as db:
        assert audit.recommend_run(db, DAY) is None and audit.recommendation_models(db, []) == []
        ids = plans.insert_recommendations(db, [
            {"created_at": created, "local_day": DAY, "slot": "morning", "action": a, "rationale": "", "model": m}
            for a, m in (("LEARN", "llm:x.gguf"), ("SLEEP", "day-planner"))])
        runs.record_run(db, "recommend", None, DAY.isoformat(), created, True, {"recommendations": ids, "picks": {}})
        runs.record_run(db, "recommend", None, DAY.isoformat(), created, False, {"failed": True})  # not ok: skipped
        assert '"picks": {}' in audit.recommend_run(db, DAY)
        assert audit.recommendation_models(db, ids) == ["llm:x.gguf", "day-planner"]
        replace_mapped(db, None, [], [
            {"local_day": DAY - timedelta(days=k), "slot": "evening", "action": "MEDITATE", "confidence": 1.0,
             "evidence": [], "computed_at": created} for k in range(3)], {})
        got = audit.slot_actions_between(db, DAY - timedelta(days=1), DAY)
        assert got == [(DAY - timedelta(days=1), "evening", "MEDITATE"), (DAY, "evening", "MEDITATE")]
