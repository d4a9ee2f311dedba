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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.records import SleepSession
from connectors.healthkit.types import ASLEEP_STAGES, _tz

GAP = timedelta(hours=2)
_GAP_US = GAP // timedelta(microseconds=1)
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


def _stage_record(name: str, stage: str, start: int, end: int, off: int | None) -> StageRecord:
    tz = UTC if off is None else _tz(off)
    return StageRecord(
        name,
        stage,
        (_EPOCH + timedelta(microseconds=start)).astimezone(tz),
        (_EPOCH + timedelta(microseconds=end)).astimezone(tz),
        off,
    )


class StageColumns:
    """The sleep stage rows of a whole export, kept as compact columns (~29 bytes a row:
    interned source and stage codes, start and end in microseconds, offset) rather than
    one object per row, and grouped into sessions at the end with numpy; a StageRecord is
    built only for the rows of the session being summed. Same sessions as `sessions()`."""

    def __init__(self) -> None:
        self._codes: dict[str | None, int] = {}  # source names and stage names, interned
        self._parts: list[tuple[np.ndarray, ...]] = []

    def __len__(self) -> int:
        return sum(len(p[0]) for p in self._parts)

    def _encode(self, arr: pa.Array) -> np.ndarray:
        enc = pc.dictionary_encode(arr, null_encoding="encode")
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        lookup = np.array([self._codes.setdefault(v, len(self._codes)) for v in enc.dictionary.to_pylist()] or [0], np.int32)
        return lookup[enc.indices.to_numpy(zero_copy_only=False)]

    def add(self, samples: dict[str, pa.Array]) -> None:
        """Keep the `sleep_stage` rows of a batch of Sample columns."""
        sleep = pc.equal(samples["metric"], "sleep_stage")
        if not pc.any(sleep).as_py():
            return
        names = self._encode(pc.filter(samples["source_name"], sleep))
        stages = self._encode(pc.filter(samples["detail"], sleep))
        starts, ends = (
            pc.filter(samples[k], sleep).cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64)
            for k in ("start_ts", "end_ts")
        )
        offs = pc.filter(samples["tz_offset_min"], sleep)
        valid = offs.is_valid().to_numpy(zero_copy_only=False)
        off = offs.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32)
        self._parts.append((names, stages, starts, ends, off, valid))

    def sessions(self) -> Iterator[SleepSession]:
        """The sessions of every row kept so far (as `sessions()` would give them)."""
        if not self._parts:
            return
        names, stages, starts, ends, off, valid = (np.concatenate(c) for c in zip(*self._parts, strict=True))
        self._parts = []
        text = [None] * len(self._codes)
        for v, c in self._codes.items():
            text[c] = v
        # per source name in Python's string order, then by (start, end); stable as sorted()
        rank = np.zeros(len(text), np.int64)
        used = sorted({text[c] for c in np.unique(names).tolist()})
        for i, v in enumerate(used):
            rank[self._codes[v]] = i
        order = np.lexsort((ends, starts, rank[names]))
        names, stages, starts, ends, off, valid = (a[order] for a in (names, stages, starts, ends, off, valid))
        # a row opens a session where the source changes or it starts more than GAP after
        # the latest end so far in its source (that is the latest end of its session)
        bounds = np.flatnonzero(np.diff(names)) + 1
        cut = np.zeros(len(names), bool)
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(names)], strict=True):
            cut[lo] = True
            latest = np.maximum.accumulate(ends[lo:hi])
            cut[lo + 1 : hi] |= starts[lo + 1 : hi] - latest[:-1] > _GAP_US
        edges = np.r_[np.flatnonzero(cut), len(names)]
        for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
            yield _session([
                _stage_record(text[n], text[s], a, b, o if v else None)
                for n, s, a, b, o, v in zip(
                    names[lo:hi].tolist(), stages[lo:hi].tolist(), starts[lo:hi].tolist(),
                    ends[lo:hi].tolist(), off[lo:hi].tolist(), valid[lo:hi].tolist(), strict=True,
                )
            ])
