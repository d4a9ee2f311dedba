"""Group SleepAnalysis stage records into nights (one `SleepSession` per source and night).

Rules (README "Sleep"):
- Records are grouped per `sourceName` (the iPhone's in-bed records and the Watch's stages
  are different sources and become different sessions; never merged or summed).
- Sorted by start; a record starting more than `GAP` after the session's latest end starts
  a new session.
- `local_day` is the local calendar day of the session's end (the day the person woke up
  on), in the UTC offset recorded with that last record.
- `sleep_min`: minutes covered by asleep stages (asleep, asleep_unspecified, core, deep,
  rem), overlaps counted once; in-bed time is never counted as sleep. None when the
  source wrote no asleep stage at all (an in-bed-only session).
- Stage minutes (`light_min` = core, `deep_min`, `rem_min`, `awake_min`) are set only
  when the source wrote staged data (iOS 16+/watchOS 9+); legacy data leaves them None.
- `is_nap`: shorter than 3 h of sleep-or-bed span and starting between 09:00 and 20:00 local.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from common.records import SleepSession
from connectors.healthkit.types import ASLEEP_STAGES, _tz

GAP = timedelta(hours=2)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NAP_MAX = timedelta(hours=3)


@dataclass(frozen=True, slots=True)
class StageRecord:
    source_name: str
    stage: str
    start: datetime  # aware, in the recorded offset
    end: datetime
    tz_offset_min: int | None


def _union_minutes(intervals: list[tuple[datetime, datetime]]) -> float:
    total = 0.0
    cur_s: datetime | None = None
    cur_e: datetime | None = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += (cur_e - cur_s).total_seconds()
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None and cur_s is not None:
        total += (cur_e - cur_s).total_seconds()
    return total / 60.0


def _session(records: list[StageRecord]) -> SleepSession:
    start = min(r.start for r in records)
    last = max(records, key=lambda r: r.end)
    end = last.end
    by_stage: dict[str, list[tuple[datetime, datetime]]] = {}
    for r in records:
        by_stage.setdefault(r.stage, []).append((r.start, r.end))
    asleep = [iv for st, ivs in by_stage.items() if st in ASLEEP_STAGES for iv in ivs]
    staged = any(st in by_stage for st in ("core", "deep", "rem"))

    def mins(stage: str) -> float | None:
        if not staged:
            return None
        return _union_minutes(by_stage.get(stage, []))

    sleep_min = _union_minutes(asleep) if asleep else None
    in_bed_min = _union_minutes(by_stage["in_bed"]) if "in_bed" in by_stage else None
    awake_min = _union_minutes(by_stage["awake"]) if "awake" in by_stage else mins("awake")
    efficiency = (
        round(100.0 * sleep_min / in_bed_min, 1)
        if sleep_min is not None and in_bed_min
        else None
    )
    local_start = start
    is_nap = (end - start) < NAP_MAX and 9 <= local_start.hour < 20
    return SleepSession(
        source="healthkit",
        session_id=f"{records[0].source_name}|{start.isoformat()}",
        start_ts=start,
        end_ts=end,
        local_day=end.date(),
        sleep_min=sleep_min,
        in_bed_min=in_bed_min,
        awake_min=awake_min,
        light_min=mins("core"),
        deep_min=mins("deep"),
        rem_min=mins("rem"),
        efficiency_pct=efficiency,
        is_nap=is_nap,
        tz_offset_min=last.tz_offset_min,
        source_name=records[0].source_name,
    )


def sessions(records: Iterable[StageRecord]) -> Iterator[SleepSession]:
    """Sleep sessions from stage records in any order."""
    per_source: dict[str, list[StageRecord]] = {}
    for r in records:
        per_source.setdefault(r.source_name, []).append(r)
    for source_name in sorted(per_source):
        rs = sorted(per_source[source_name], key=lambda r: (r.start, r.end))
        group: list[StageRecord] = []
        group_end: datetime | None = None
        for r in rs:
            if group and group_end is not None and r.start - group_end > GAP:
                yield _session(group)
                group = []
                group_end = None
            group.append(r)
            group_end = r.end if group_end is None or r.end > group_end else group_end
        if group:
            yield _session(group)


def stage_records(samples: dict[str, pa.Array]) -> list[StageRecord]:
    """The `sleep_stage` rows of Sample columns as StageRecords (aware datetimes in the
    recorded offset; UTC where the export gave none)."""
    sleep = pc.equal(samples["metric"], "sleep_stage")
    if not pc.any(sleep).as_py():
        return []
    names = pc.filter(samples["source_name"], sleep).to_pylist()
    stages = pc.filter(samples["detail"], sleep).to_pylist()
    offs = pc.filter(samples["tz_offset_min"], sleep).to_pylist()
    # instants as integer microseconds: much cheaper than Arrow's aware datetimes
    starts, ends = (pc.filter(samples[k], sleep).cast(pa.int64()).to_pylist() for k in ("start_ts", "end_ts"))
    out = []
    for name, stage, start, end, off in zip(names, stages, starts, ends, offs, strict=True):
        tz = UTC if off is None else _tz(off)
        out.append(
            StageRecord(
                name,
                stage,
                (_EPOCH + timedelta(microseconds=start)).astimezone(tz),
                (_EPOCH + timedelta(microseconds=end)).astimezone(tz),
                off,
            )
        )
    return out
