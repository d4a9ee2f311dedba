"""Columnar conversion of quantity Records: Python string lists -> typed Arrow columns.

The parser only appends attribute strings to lists; everything per-row after that
(dates, offsets, local day, metric names, unit conversion, metadata JSON) runs here in
Arrow's C++ kernels, a batch at a time. Per-distinct-value work (a few dozen types, units
and device strings) is done in Python.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.timeutil import EARLIEST_US, LATEST_US, out_of_range_detail
from connectors.healthkit.types import (
    MINDFUL_TYPE,
    SLEEP_STAGES,
    SLEEP_TYPE,
    STAND_HOUR_TYPE,
    parse_date,
    parse_device,
    quantity_mapping,
    snake,
)
from connectors.screen import END_BEFORE_START, NOT_FINITE

_TS = pa.timestamp("us", tz="UTC")
# `<<HKDevice: 0x283a8a5d0>, name:...>`: the address differs per record; dropping it first
# leaves a few distinct device strings per batch for `parse_device` (same result: it cuts
# at the first ">,", which this pattern only matches when it is that one).
_HKDEVICE_ADDRESS = r"^<<HKDevice[^>]*>,"


NULL = "\x00"  # stands for an absent attribute in the parser's string lists (never in XML)
_NULL_STR = pa.scalar(None, pa.string())


def _arr(values: Sequence[str | None] | pa.Array) -> pa.Array:
    return values if isinstance(values, pa.Array) else pa.array(values, pa.string())


def strings(values: list[str]) -> pa.Array:
    """Arrow strings from a list of str (`NULL` -> null). ASCII text (nearly all of an
    export) is copied in one piece instead of converted string by string."""
    joined = "".join(values)
    data = joined.encode("utf-8")
    if len(data) == len(joined):
        offsets = np.zeros(len(values) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, values), np.int64, len(values)), out=offsets[1:])
        if offsets[-1] < 2**31:
            arr = pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))
        else:
            arr = pa.LargeStringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(data))
            arr = arr.cast(pa.string())
    else:
        arr = pa.array(values, pa.string())
    if NULL in joined:
        arr = pc.if_else(pc.equal(arr, NULL), _NULL_STR, arr)
    return arr
_DATE_FMT = "%Y-%m-%d %H:%M:%S"


class ConversionError(ValueError):
    """A column value could not be read (bad date or number); `row` is batch-relative."""

    def __init__(self, row: int, detail: str):
        super().__init__(detail)
        self.row = row


class RangeError(ConversionError):
    """A readable date outside the sane range (common.timeutil)."""


def _dates(strings: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(UTC instants, offset minutes, local day) of `YYYY-MM-DD HH:MM:SS +HHMM` strings."""
    local = pc.strptime(
        pc.utf8_slice_codeunits(strings, 0, 19), format=_DATE_FMT, unit="s", error_is_null=True
    )
    sign_ch = pc.utf8_slice_codeunits(strings, 20, 21)
    try:
        hh = pc.cast(pc.utf8_slice_codeunits(strings, 21, 23), pa.int32(), safe=False)
        mm = pc.cast(pc.utf8_slice_codeunits(strings, 23, 25), pa.int32(), safe=False)
    except pa.ArrowInvalid:  # not digits where the offset should be
        return _dates_slow(strings)
    sign = pc.if_else(pc.equal(sign_ch, "-"), -1, 1)
    offset = pc.multiply(sign, pc.add(pc.multiply(hh, 60), mm))
    well_formed = pc.and_(
        pc.equal(pc.utf8_length(strings), 25),
        pc.and_(pc.is_in(sign_ch, pa.array(["+", "-"])), pc.is_valid(local)),
    )
    if not pc.all(well_formed).as_py():
        return _dates_slow(strings)
    secs = pc.subtract(pc.cast(local, pa.int64()), pc.multiply(pc.cast(offset, pa.int64()), 60))
    utc = pc.cast(pc.multiply(secs, 1_000_000), _TS)
    return utc, offset, pc.cast(local, pa.date32())


def _dates_slow(strings: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Row by row, for batches holding a date in an unusual shape (or a bad one)."""
    utc, off, day = [], [], []
    for i, s in enumerate(strings.to_pylist()):
        try:
            dt, o = parse_date(s)
        except (ValueError, TypeError):
            raise ConversionError(i, f"unreadable date {s!r}") from None
        utc.append(dt)
        off.append(o)
        day.append(dt.date())
    return (
        pa.array(utc, _TS),
        pa.array(off, pa.int32()),
        pa.array(day, pa.date32()),
    )


_MAX_OFFSET_MIN = 18 * 60  # ISO 8601's widest UTC offset; real zones span -12:00 .. +14:00


def check_range(
    start_ts: pa.Array, end_ts: pa.Array, starts: pa.Array | Sequence[str], ends: pa.Array | Sequence[str],
    offsets: pa.Array,
) -> None:
    """RangeError for the first row whose startDate or endDate lies outside the sane range
    (common.timeutil), or whose startDate carries an impossible UTC offset (+9999): the same
    check whichever path read the dates."""
    off = pc.abs(pc.cast(offsets, pa.int64()))
    bad_off = pc.fill_null(pc.greater(off, _MAX_OFFSET_MIN), False)
    if pc.any(bad_off).as_py():
        row = pc.index(bad_off, True).as_py()
        raise RangeError(row, f"startDate {_arr(starts)[row].as_py()!r} has an impossible UTC offset")
    for ts, text, what in ((start_ts, starts, "startDate"), (end_ts, ends, "endDate")):
        us = pc.cast(ts, pa.int64())
        bad = pc.or_(pc.less(us, EARLIEST_US), pc.greater(us, LATEST_US))
        if pc.any(bad).as_py():
            row = pc.index(bad, True).as_py()
            raise RangeError(row, out_of_range_detail(what, repr(_arr(text)[row].as_py())))


def screen_rows(columns: dict[str, pa.Array]) -> tuple[dict[str, pa.Array], dict[str, int]]:
    """Sample columns without the rows that cannot be stored (connectors/screen.py: a NaN
    or infinite value, an end before its start), and how many of each were left out."""
    value = columns["value"]
    not_finite = pc.fill_null(pc.invert(pc.is_finite(value)), False)
    backwards = pc.less(pc.cast(columns["end_ts"], pa.int64()), pc.cast(columns["start_ts"], pa.int64()))
    counts = {
        NOT_FINITE: pc.sum(pc.cast(not_finite, pa.int64())).as_py() or 0,
        END_BEFORE_START: pc.sum(pc.cast(pc.and_(backwards, pc.invert(not_finite)), pa.int64())).as_py() or 0,
    }
    if not any(counts.values()):
        return columns, {}
    keep = pc.invert(pc.or_(not_finite, backwards))
    return {k: pc.filter(v, keep) for k, v in columns.items()}, {k: n for k, n in counts.items() if n}


def _values(values: Sequence[str | None] | pa.Array) -> pa.Array:
    arr = _arr(values)
    try:
        return pc.cast(arr, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out: list[float | None] = []
        for v in arr.to_pylist():
            try:
                out.append(float(v) if v is not None else None)
            except ValueError:
                out.append(None)  # never invent a number
        return pa.array(out, pa.float64())


def _codes(values: Sequence[str | None] | pa.Array) -> tuple[np.ndarray, list[str | None]]:
    """Dictionary-encode a string list: (int codes, distinct values)."""
    enc = pc.dictionary_encode(_arr(values), null_encoding="encode")
    return enc.indices.to_numpy(zero_copy_only=False), enc.dictionary.to_pylist()


def _json_str(strings: Sequence[str] | pa.Array) -> pa.Array:
    """JSON string literals (quoted, escaped) for a list of strings, vectorised."""
    arr = _arr(strings)
    if pc.any(pc.match_substring_regex(arr, r"[\x00-\x1f]")).as_py():
        return pa.array([json.dumps(s, ensure_ascii=False) for s in arr.to_pylist()], pa.string())
    arr = pc.replace_substring(arr, "\\", "\\\\")
    arr = pc.replace_substring(arr, '"', '\\"')
    return pc.binary_join_element_wise('"', arr, '"', "")


def _metadata_json(
    n: int, rows: Sequence[int] | np.ndarray, keys: Sequence[str] | pa.Array, vals: Sequence[str] | pa.Array
) -> pa.Array:
    """One JSON object per row from (row, key, value) triples; null for rows without any."""
    if len(rows) == 0:
        return pa.nulls(n, pa.string())
    row_arr = np.asarray(rows, dtype=np.int64)
    pairs = pc.binary_join_element_wise(_json_str(keys), _json_str(vals), ":")
    offsets = np.searchsorted(row_arr, np.arange(n + 1), side="left").astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), pairs)
    joined = pc.binary_join(lists, ",")
    wrapped = pc.binary_join_element_wise("{", joined, "}", "")
    return pc.if_else(pc.equal(joined, ""), pa.scalar(None, pa.string()), wrapped)


def quantity_columns(
    types: Sequence[str] | pa.Array,
    sources: Sequence[str] | pa.Array,
    devices: Sequence[str | None] | pa.Array,
    units: Sequence[str | None] | pa.Array,
    starts: Sequence[str] | pa.Array,
    ends: Sequence[str] | pa.Array,
    values: Sequence[str | None] | pa.Array,
    md_rows: Sequence[int] | np.ndarray = (),
    md_keys: Sequence[str] | pa.Array = (),
    md_vals: Sequence[str] | pa.Array = (),
    dates: tuple[pa.Array, pa.Array, pa.Array, pa.Array] | None = None,
) -> dict[str, pa.Array]:
    """Columns of `common.records.Sample` for a batch of quantity Records (Python string
    lists or Arrow string arrays). `dates`: (start_ts, end_ts, tz_offset_min, local_day)
    when already read (by the native scanner), else they are parsed here."""
    n = len(types)
    t_codes, t_dict = _codes(types)
    u_codes, u_dict = _codes(units)
    combo = t_codes.astype(np.int64) * (len(u_dict) + 1) + u_codes
    uniq, inverse = np.unique(combo, return_inverse=True)
    metric_of, unit_of, factor_of = [], [], []
    for c in uniq:
        metric, unit, factor = quantity_mapping(t_dict[c // (len(u_dict) + 1)], u_dict[c % (len(u_dict) + 1)])
        metric_of.append(metric)
        unit_of.append(unit)
        factor_of.append(factor)
    inv = pa.array(inverse.astype(np.int32))
    metric = pc.take(pa.array(metric_of, pa.string()), inv)
    unit = pc.take(pa.array(unit_of, pa.string()), inv)
    value = _values(values)
    factors = np.asarray(factor_of)[inverse]
    if not np.all(factors == 1.0):
        value = pc.multiply(value, pa.array(factors))

    dev = _arr(devices)
    if pc.any(pc.starts_with(dev, "<<HKDevice")).as_py():
        dev = pc.replace_substring_regex(dev, _HKDEVICE_ADDRESS, "<<HKDevice>,", max_replacements=1)
    d_codes, d_dict = _codes(dev)
    device = pc.take(pa.array([parse_device(d) for d in d_dict], pa.string()), pa.array(d_codes))

    if dates is not None:
        start_ts, end_ts, offset, day = dates
    else:
        start_ts, offset, day = _dates(_arr(starts))
        end_ts, _, _ = _dates(_arr(ends))
    check_range(start_ts, end_ts, starts, ends, offset)
    return {
        "source": pa.repeat("healthkit", n),
        "metric": metric,
        "start_ts": start_ts,
        "end_ts": end_ts,
        "value": value,
        "unit": unit,
        "local_day": day,
        "source_name": _arr(sources),
        "device": device,
        "tz_offset_min": offset,
        "detail": _metadata_json(n, md_rows, md_keys, md_vals),
    }


def category_columns(
    types: pa.Array,
    sources: pa.Array,
    devices: pa.Array,
    units: pa.Array,
    starts: pa.Array,
    ends: pa.Array,
    values: pa.Array,
    dates: tuple[pa.Array, pa.Array, pa.Array, pa.Array] | None = None,
) -> dict[str, pa.Array]:
    """Columns of `common.records.Sample` for category Records (sleep stages, mindful
    minutes, stand hours, events...): `category_value`'s rules applied once per distinct
    (type, value, unit) instead of once per row. `dates` as for `quantity_columns`."""
    n = len(types)
    if dates is not None:
        start_ts, end_ts, offset, day = dates
    else:
        start_ts, offset, day = _dates(starts)
        end_ts, _, _ = _dates(ends)
    check_range(start_ts, end_ts, starts, ends, offset)
    minutes = pc.divide(pc.cast(pc.subtract(pc.cast(end_ts, pa.int64()), pc.cast(start_ts, pa.int64())), pa.float64()), 60e6)
    t_codes, t_dict = _codes(types)
    v_codes, v_dict = _codes(values)
    u_codes, u_dict = _codes(units)
    nv, nu = len(v_dict) + 1, len(u_dict) + 1
    combo = (t_codes.astype(np.int64) * nv + v_codes) * nu + u_codes
    uniq, inverse = np.unique(combo, return_inverse=True)
    metric_of, unit_of, detail_of, number_of, timed_of = [], [], [], [], []
    for c in uniq:
        t = t_dict[c // (nv * nu)]
        raw = v_dict[(c // nu) % nv]
        unit = u_dict[c % nu]
        metric, number, timed, detail = category_value(t, raw)
        if timed or t == STAND_HOUR_TYPE:
            unit = "min" if timed else "count"
        metric_of.append(metric)
        unit_of.append(unit or "")
        detail_of.append(detail)
        number_of.append(number)
        timed_of.append(timed)
    inv = pa.array(inverse.astype(np.int32))
    timed = pc.take(pa.array(timed_of, pa.bool_()), inv)
    value = pc.if_else(timed, minutes, pc.take(pa.array(number_of, pa.float64()), inv))
    d_codes, d_dict = _codes(devices)
    return {
        "source": pa.repeat("healthkit", n),
        "metric": pc.take(pa.array(metric_of, pa.string()), inv),
        "start_ts": start_ts,
        "end_ts": end_ts,
        "value": value,
        "unit": pc.take(pa.array(unit_of, pa.string()), inv),
        "local_day": day,
        "source_name": sources,
        "device": pc.take(pa.array([parse_device(d) for d in d_dict], pa.string()), pa.array(d_codes)),
        "tz_offset_min": offset,
        "detail": pc.take(pa.array(detail_of, pa.string()), inv),
    }


def category_value(t: str, raw: str | None) -> tuple[str, float | None, bool, str | None]:
    """(metric, number, value is the duration in minutes, detail) of a category Record."""
    if t == SLEEP_TYPE:
        return "sleep_stage", None, True, SLEEP_STAGES.get(raw or "", snake(raw or "unknown"))
    if t == MINDFUL_TYPE:
        return "mindful", None, True, None
    if t == STAND_HOUR_TYPE:
        stood = (raw or "").endswith("Stood")
        return "stand_hour", 1.0 if stood else 0.0, False, "stood" if stood else "idle"
    number = None
    if raw is not None:
        try:
            number = float(raw)
        except ValueError:
            number = None
    detail = raw.removeprefix("HKCategoryValue") if number is None and raw is not None else None
    return snake(t), number, False, detail
