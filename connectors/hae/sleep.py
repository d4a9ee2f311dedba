"""Health Auto Export ``sleep_analysis`` in both of its forms -> sleep sessions.

**Aggregated** ("Summarize data" on, the default): one entry per night, durations in the
metric's ``units`` (hours): ``totalSleep``, ``asleep``, ``core``, ``deep``, ``rem``,
``awake``, ``inBed``, with ``sleepStart``/``sleepEnd`` and ``inBedStart``/``inBedEnd``; the
older form has only ``asleep`` and ``inBed`` (with ``sleepSource``/``inBedSource``).
``sleep_min`` is ``totalSleep``; without it, the larger of ``asleep`` and ``core + deep +
rem`` (older versions wrote the total as ``asleep``, newer ones only the unstaged part:
taking the larger never counts the same minutes twice). Zero ``inBed``/``awake`` with no
in-bed times means "not recorded": None, never 0.

**Per stage** ("Summarize data" off): one entry per stage segment, ``startDate``,
``endDate``, ``value`` (``Core``, ``Deep``, ``REM``, ``Awake``, ``In Bed``, ``Asleep``,
``Unspecified``) and ``qty`` (hours). Each segment is also a ``sleep_stage`` sample
(minutes; its stage in ``detail``; keyed by its own start and end, so overlapping files
store it once). Segments are grouped into sleeps: sorted by start, a gap of more than two
hours starts a new one; ``sleep_min`` is the union of the asleep stages (the Watch's and
another device's overlapping segments counted once), ``in_bed_min`` the union of in-bed
segments.

Every sleep is attributed to the local day its person woke up on (the end's local date).
The main sleep of a day is ``night:<day>`` in both forms, so an aggregated and a per-stage
export of the same night, overlapping daily files and re-imports all land on one row (the
later import wins). Other sleeps of that day are ``sleep:<start UTC>``; ``is_nap`` when
shorter than 3 h and starting between 09:00 and 20:00 local.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC

from common.records import Sample, SleepSession
from connectors.hae.dates import BadDate, Instant, day_of, parse_day, parse_instant, to_datetime
from connectors.hae.series import SOURCE, devices

GAP_S = 2 * 3600
NAP_MAX_S = 3 * 3600
STAGES = {
    "core": "core", "deep": "deep", "rem": "rem", "awake": "awake", "in bed": "in_bed", "inbed": "in_bed",
    "asleep": "asleep_unspecified", "unspecified": "asleep_unspecified", "asleep unspecified": "asleep_unspecified",
}
ASLEEP = frozenset({"asleep_unspecified", "core", "deep", "rem"})
SERIES = "hae_stages"

Fail = Callable[[str, str], Exception]  # (position, detail) -> the error to raise


def is_per_stage(point: dict) -> bool:
    return "startDate" in point and "sleepStart" not in point and "inBedStart" not in point


def _num(point: dict, key: str, pos: str, fail: Fail) -> float | None:
    v = point.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise fail(pos, f"{key!r} is not a number: {v!r}")
    if v < 0:
        raise fail(pos, f"{key!r} is negative: {v!r}")
    return float(v)


def _when(point: dict, key: str, pos: str, fail: Fail) -> Instant | None:
    v = point.get(key)
    if v in (None, ""):
        return None
    try:
        return parse_instant(v)
    except BadDate as exc:
        raise fail(pos, f"{key!r}: {exc}") from None


def aggregated(point: dict, to_min: float, pos: str, fail: Fail, marker: Instant | None = None) -> SleepSession | None:
    """One night of the aggregated form; None when it holds no sleep at all. Without sleep or
    in-bed times the night is placed at ``marker`` (the CSV row's time), else at the start
    of its ``date``."""
    mins = {k: (x * to_min if (x := _num(point, k, pos, fail)) is not None else None)
            for k in ("totalSleep", "asleep", "core", "deep", "rem", "awake", "inBed")}
    staged = [mins[k] for k in ("core", "deep", "rem") if mins[k] is not None]
    stage_sum = sum(staged) if staged else None
    if mins["totalSleep"] is not None:
        sleep_min = mins["totalSleep"]
    else:
        known = [x for x in (mins["asleep"], stage_sum) if x is not None]
        sleep_min = max(known) if known else None
    start = _when(point, "sleepStart", pos, fail) or _when(point, "inBedStart", pos, fail)
    end = _when(point, "sleepEnd", pos, fail) or _when(point, "inBedEnd", pos, fail)
    in_bed_times = point.get("inBedStart") not in (None, "")
    in_bed = mins["inBed"] if (mins["inBed"] or in_bed_times) else None
    if not sleep_min and not in_bed:
        return None
    if start is None or end is None:
        # No times (as in the CSV export): a zero-length marker at the night's date; the
        # durations are the app's, the times unknown (never invented).
        if marker is None:
            try:
                day = parse_day(point.get("date"))
            except BadDate as exc:
                raise fail(pos, f"'date': {exc}") from None
            marker = Instant(day * 86400, 0, day, 0)
        start = end = marker
    if end.epoch < start.epoch:
        raise fail(pos, "sleep ends before it starts")
    has_stages = bool(staged) and stage_sum
    return SleepSession(
        source=SOURCE,
        session_id=f"night:{day_of(end.day).isoformat()}",
        start_ts=to_datetime(start.epoch, start.offset_min),
        end_ts=to_datetime(end.epoch, end.offset_min),
        local_day=day_of(end.day),
        sleep_min=sleep_min,
        in_bed_min=in_bed,
        awake_min=mins["awake"] if (mins["awake"] or has_stages) else None,
        light_min=mins["core"] if has_stages else None,
        deep_min=mins["deep"] if has_stages else None,
        rem_min=mins["rem"] if has_stages else None,
        efficiency_pct=round(100.0 * sleep_min / in_bed, 1) if sleep_min and in_bed else None,
        is_nap=False,
        tz_offset_min=end.offset_min,
        source_name=devices(point.get("source") or point.get("sleepSource")) or "",
    )


@dataclass(frozen=True)
class Segment:
    stage: str
    start: Instant
    end: Instant
    device: str | None


def segment(point: dict, to_min: float, pos: str, fail: Fail) -> tuple[Segment, Sample]:
    """A per-stage entry: its segment and its ``sleep_stage`` sample."""
    start = _when(point, "startDate", pos, fail)
    end = _when(point, "endDate", pos, fail)
    if start is None or end is None:
        raise fail(pos, "a sleep stage needs 'startDate' and 'endDate'")
    if end.epoch < start.epoch:
        raise fail(pos, "sleep stage ends before it starts")
    raw = point.get("value")
    stage = STAGES.get(str(raw).strip().lower()) if raw is not None else None
    if stage is None:
        raise fail(pos, f"unknown sleep stage {raw!r} (known: Core, Deep, REM, Awake, In Bed, Asleep, Unspecified)")
    qty = _num(point, "qty", pos, fail)
    minutes = qty * to_min if qty is not None else (end.epoch - start.epoch) / 60.0
    device = devices(point.get("source"))
    seg = Segment(stage, start, end, device)
    sample = Sample(
        source=SOURCE,
        metric="sleep_stage",
        start_ts=to_datetime(start.epoch, start.offset_min),
        end_ts=to_datetime(end.epoch, end.offset_min),
        value=minutes,
        unit="min",
        local_day=day_of(start.day),
        source_name=SERIES,
        device=device,
        tz_offset_min=start.offset_min,
        detail=stage,
    )
    return seg, sample


def _union_min(intervals: list[tuple[int, int]]) -> float:
    total = 0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]
    return total / 60.0


def _session(group: list[Segment]) -> tuple[SleepSession, int]:
    first = min(group, key=lambda g: g.start.epoch)
    last = max(group, key=lambda g: g.end.epoch)
    by: dict[str, list[tuple[int, int]]] = {}
    for g in group:
        by.setdefault(g.stage, []).append((g.start.epoch, g.end.epoch))
    asleep = [iv for st, ivs in by.items() if st in ASLEEP for iv in ivs]
    staged = any(st in by for st in ("core", "deep", "rem"))
    sleep_min = _union_min(asleep) if asleep else None
    in_bed = _union_min(by["in_bed"]) if "in_bed" in by else None

    def stage_min(st: str) -> float | None:
        return _union_min(by.get(st, [])) if staged else None

    span = last.end.epoch - first.start.epoch
    start_local_hour = first.start.second_of_day // 3600
    names = sorted({g.device for g in group if g.device})
    session = SleepSession(
        source=SOURCE,
        session_id="",  # set by the caller
        start_ts=to_datetime(first.start.epoch, first.start.offset_min),
        end_ts=to_datetime(last.end.epoch, last.end.offset_min),
        local_day=day_of(last.end.day),
        sleep_min=sleep_min,
        in_bed_min=in_bed,
        awake_min=_union_min(by["awake"]) if "awake" in by else stage_min("awake"),
        light_min=stage_min("core"),
        deep_min=stage_min("deep"),
        rem_min=stage_min("rem"),
        efficiency_pct=round(100.0 * sleep_min / in_bed, 1) if sleep_min is not None and in_bed else None,
        is_nap=span < NAP_MAX_S and 9 <= start_local_hour < 20,
        tz_offset_min=last.end.offset_min,
        source_name="|".join(names),
    )
    return session, span


def sessions(segments: list[Segment]) -> Iterator[SleepSession]:
    """Sleeps from per-stage segments in any order (see the module doc)."""
    groups: list[list[Segment]] = []
    group_end = None
    for seg in sorted(segments, key=lambda g: (g.start.epoch, g.end.epoch)):
        if groups and group_end is not None and seg.start.epoch - group_end <= GAP_S:
            groups[-1].append(seg)
            group_end = max(group_end, seg.end.epoch)
        else:
            groups.append([seg])
            group_end = seg.end.epoch
    built = [_session(g) for g in groups]
    main: dict[object, int] = {}  # local day -> index of its longest non-nap sleep
    for i, (s, span) in enumerate(built):
        if s.is_nap or not s.sleep_min and not s.in_bed_min:
            continue
        j = main.get(s.local_day)
        if j is None or span > built[j][1]:
            main[s.local_day] = i
    chosen = set(main.values())
    for i, (s, _span) in enumerate(built):
        if i in chosen:
            sid = f"night:{s.local_day.isoformat()}"
        else:
            sid = f"sleep:{s.start_ts.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
        yield replace(s, session_id=sid)

