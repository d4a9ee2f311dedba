"""The Garmin account export and the live sync describe the same day the same way: one row."""

from __future__ import annotations

from datetime import UTC, date, datetime

from connectors.garmin import connect_export, live
from storage import open_db, write_records

DAY = date(2024, 3, 4)
SUMMARY = {
    "calendarDate": DAY.isoformat(),
    "wellnessStartTimeGmt": "2024-03-03T23:00:00.0",
    "wellnessEndTimeGmt": "2024-03-04T23:00:00.0",
    "wellnessStartTimeLocal": "2024-03-04T00:00:00.0",
    "wellnessEndTimeLocal": "2024-03-05T00:00:00.0",
    "totalSteps": 8123,
    "restingHeartRate": 52,
}


def test_export_and_live_daily_summary_land_as_one_row_per_metric(tmp_path):
    exported = [r for r in connect_export._uds(dict(SUMMARY), DAY)]
    synced = [r for r in live.map_summary(dict(SUMMARY), DAY) if type(r).__name__ == "Sample"]
    assert {s.metric for s in exported} & {s.metric for s in synced} >= {"steps", "resting_heart_rate"}
    with open_db(tmp_path / "g.duckdb") as db:
        write_records(db, exported)
        write_records(db, synced)
        rows = db.query("SELECT metric, count(*) FROM samples WHERE metric IN ('steps', "
                        "'resting_heart_rate') GROUP BY metric ORDER BY metric")[1]
    assert rows == [("resting_heart_rate", 1), ("steps", 1)]
    assert datetime(2024, 3, 3, 23, tzinfo=UTC) in {s.start_ts for s in exported}
