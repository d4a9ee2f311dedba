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

from common.records import RecordBatch, SleepSession, field_names
from connectors.healthkit.types import ASLEEP_STAGES, _tz

GAP = timedelta(hours=2)
_GAP_US = GAP // timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NAP_MAX = timedelta(hours=3)
SESSIONS_PER_BATCH = 20_000  # one RecordBatch(SleepSession) per this many nights
_PACK_LIMIT = 2**62  # (session, end) packed in one int64 below this


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

    def sessions(self) -> Iterator[RecordBatch]:
        """The sessions of every row kept so far (as `sessions()` would give them), as
        columnar `RecordBatch(SleepSession)`s of up to SESSIONS_PER_BATCH nights: grouped and
        summed with numpy, no object per row or per session."""
        if not self._parts:
            return
        names, stages, starts, ends, off, valid = (np.concatenate(c) for c in zip(*self._parts, strict=True))
        self._parts = []
        text: list[str | None] = [None] * len(self._codes)
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
        first = np.flatnonzero(cut)
        if (ends < starts).any():  # a stage that ends before it starts: the rules row by row
            edges = np.r_[first, len(names)].tolist()
            yield _batch([
                _session([
                    _stage_record(text[n], text[s], a, b, o if v else None)
                    for n, s, a, b, o, v in zip(
                        names[lo:hi].tolist(), stages[lo:hi].tolist(), starts[lo:hi].tolist(),
                        ends[lo:hi].tolist(), off[lo:hi].tolist(), valid[lo:hi].tolist(), strict=True,
                    )
                ])
                for lo, hi in zip(edges[:-1], edges[1:], strict=True)
            ])
            return
        # summed a slice of sessions at a time: the temporaries stay small however long
        # the history (at 10 M Records, 224 k nights at once cost ~100 MB more)
        edges = np.r_[first, len(names)]
        for k in range(0, len(first), SESSIONS_PER_BATCH):
            lo, hi = int(edges[k]), int(edges[min(k + SESSIONS_PER_BATCH, len(first))])
            rows = slice(lo, hi)
            yield _summarise(text, names[rows], stages[rows], starts[rows], ends[rows], off[rows], valid[rows],
                             first[k : k + SESSIONS_PER_BATCH] - lo)


def _batch(records: list[SleepSession]) -> RecordBatch:
    return RecordBatch(SleepSession, {n: [getattr(r, n) for r in records] for n in field_names(SleepSession)})


def _summarise(
    text: list[str | None],
    names: np.ndarray,
    stages: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    off: np.ndarray,
    valid: np.ndarray,
    first: np.ndarray,
) -> RecordBatch:
    """`_session` for every session at once. Rows are sorted by (source, start, end) and
    session k is rows first[k]..first[k+1]-1; no row ends before it starts."""
    n_sess = len(first)
    opens = np.zeros(len(names), np.int64)
    opens[first] = 1
    seg = np.cumsum(opens) - 1  # the session of each row
    # the session's start: its first row (min start; the first of equal starts, as min());
    # its end: the first row with the latest end (as max(records, key=end))
    latest = np.maximum.reduceat(ends, first)
    is_last = ends == latest[seg]
    last = np.full(n_sess, len(names), np.int64)
    np.minimum.at(last, seg[is_last], np.flatnonzero(is_last))
    start_us, end_us = starts[first], ends[last]
    start_off = np.where(valid[first], off[first], 0).astype(np.int64)
    end_off = np.where(valid[last], off[last], 0).astype(np.int64)

    def rows_of(wanted: frozenset[str] | set[str]) -> np.ndarray:
        return np.array([t in wanted for t in text] or [False], bool)[stages]

    def union(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(minutes covered by the rows in mask, overlaps once; whether any) per session."""
        idx = np.flatnonzero(mask)
        s, e, g = starts[idx], ends[idx], seg[idx]
        covered = np.zeros(n_sess)
        has = np.bincount(g, minlength=n_sess) > 0
        if len(idx):
            # the latest end of the earlier rows of the same session, by a running maximum
            # over (session, end) packed in one integer: sessions never overlap in it
            base = start_us[g]
            span = int((e - base).max()) + 1
            if span * (n_sess + 1) < _PACK_LIMIT:
                packed = np.maximum.accumulate(g.astype(np.int64) * span + (e - base))
                prev = np.r_[-1, packed[:-1]] - g.astype(np.int64) * span  # < 0: none earlier
                prev_end = np.where(prev >= 0, prev + base, np.iinfo(np.int64).min)
            else:  # spans too wide to pack: a loop over the sessions
                prev_end = np.empty(len(idx), np.int64)
                for lo, hi in zip(*_runs(g), strict=True):
                    run = np.maximum.accumulate(e[lo:hi])
                    prev_end[lo:hi] = np.r_[np.iinfo(np.int64).min, run[:-1]]
            # merged blocks as `_union_minutes` makes them (a row past the block's end opens
            # the next), their seconds summed in order: the same floats to the last bit
            opens = np.flatnonzero(s > prev_end)
            seconds = (np.maximum.reduceat(e, opens) - s[opens]) / 1_000_000
            covered = np.bincount(g[opens], weights=seconds, minlength=n_sess)
        return covered / 60.0, has

    asleep, any_asleep = union(rows_of(ASLEEP_STAGES))
    in_bed, any_in_bed = union(rows_of({"in_bed"}))
    awake, any_awake = union(rows_of({"awake"}))
    staged = np.zeros(n_sess, bool)
    per_stage = {}
    for st in ("core", "deep", "rem"):
        per_stage[st], has = union(rows_of({st}))
        staged |= has

    def col(values: np.ndarray, present: np.ndarray) -> pa.Array:
        return pa.array(values, pa.float64(), mask=~present)

    sleep_min = col(asleep, any_asleep)
    efficiency = [
        round(100.0 * a / b, 1) if ha and hb and b else None
        for a, b, ha, hb in zip(asleep.tolist(), in_bed.tolist(), any_asleep.tolist(), any_in_bed.tolist(), strict=True)
    ]
    local_start = start_us + start_off * 60_000_000
    hour = (local_start // 3_600_000_000) % 24
    is_nap = (end_us - start_us < NAP_MAX // timedelta(microseconds=1)) & (hour >= 9) & (hour < 20)
    local_day = (end_us + end_off * 60_000_000) // 86_400_000_000
    source_name = [text[c] for c in names[first].tolist()]
    session_id = [f"{n}|{t}" for n, t in zip(source_name, _isoformat(start_us, start_off, valid[first]), strict=True)]
    none = pa.nulls(n_sess, pa.float64())
    return RecordBatch(SleepSession, {
        "source": pa.array(["healthkit"] * n_sess, pa.string()),
        "session_id": pa.array(session_id, pa.string()),
        "start_ts": pa.array(start_us, pa.timestamp("us", "UTC")),
        "end_ts": pa.array(end_us, pa.timestamp("us", "UTC")),
        "local_day": pa.array(local_day.astype(np.int32), pa.date32()),
        "sleep_min": sleep_min,
        "in_bed_min": col(in_bed, any_in_bed),
        "awake_min": col(awake, any_awake | staged),
        "light_min": col(per_stage["core"], staged),
        "deep_min": col(per_stage["deep"], staged),
        "rem_min": col(per_stage["rem"], staged),
        "efficiency_pct": pa.array(efficiency, pa.float64()),
        "score": none,
        "is_nap": pa.array(is_nap, pa.bool_()),
        "respiratory_rate_brpm": none,
        "hrv_rmssd_ms": none,
        "resting_hr_bpm": none,
        "tz_offset_min": pa.array(off[last].astype(np.int64), pa.int64(), mask=~valid[last]),
        "source_name": pa.array(source_name, pa.string()),
    })


def _runs(g: np.ndarray) -> tuple[list[int], list[int]]:
    edges = np.r_[0, np.flatnonzero(np.diff(g)) + 1, len(g)].tolist()
    return edges[:-1], edges[1:]


def _isoformat(us: np.ndarray, off_min: np.ndarray, has_off: np.ndarray) -> list[str]:
    """`datetime.isoformat()` of each instant in its recorded offset (UTC where none)."""
    off_min = np.where(has_off, off_min, 0)
    local = (us + off_min * 60_000_000).astype("datetime64[us]")
    wall = np.datetime_as_string(local, unit="s")
    fraction = us % 1_000_000 != 0  # isoformat() adds microseconds only where there are some
    if fraction.any():
        wall = np.where(fraction, np.datetime_as_string(local, unit="us"), wall)
    wall = wall.tolist()
    sign = np.where(off_min < 0, "-", "+")
    a = np.abs(off_min)
    return [
        f"{w}{sg}{h:02d}:{m:02d}"
        for w, sg, h, m in zip(wall, sign.tolist(), (a // 60).tolist(), (a % 60).tolist(), strict=True)
    ]
