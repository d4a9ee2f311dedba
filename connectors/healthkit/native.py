"""The column builders of the parser: the native one (the `_scan` C extension, which also
scans Records itself) and a pure-Python one with the same methods, used when the
extension is not built or `RHYTHM_NO_NATIVE=1` is set.

Both hold the Records read so far as seven string columns (type, sourceName, device,
unit, startDate, endDate, value), quantity and category Records apart, and hand them out
as Arrow arrays a batch at a time.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np
import pyarrow as pa

from connectors.healthkit.columns import NULL, strings

try:  # built by `pip install -e .` (setup.py); optional
    from connectors.healthkit._scan import Scanner as _Scanner
except ImportError:  # pragma: no cover - depends on the build
    _Scanner = None

DISABLE_ENV = "RHYTHM_NO_NATIVE"


def available() -> bool:
    """True when the native scanner is built and not switched off by RHYTHM_NO_NATIVE=1."""
    return _Scanner is not None and os.environ.get(DISABLE_ENV, "") in ("", "0")


_TS = pa.timestamp("us", tz="UTC")
Dates = tuple[pa.Array, pa.Array, pa.Array, pa.Array]  # start_ts, end_ts, tz_offset_min, local_day


def _arrow(col: tuple[int, bytes, bytes, bytes | None]) -> pa.Array:
    n, offsets, data, valid = col
    return pa.StringArray.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(data), None if valid is None else pa.py_buffer(valid)
    )


def _dates(raw: tuple[bytes, bytes, bytes, bytes] | None) -> Dates | None:
    """The dates the scanner read (None: some row needs the Arrow date kernels)."""
    if raw is None:
        return None
    start, end, off, day = raw
    n = len(day) // 4
    return (
        pa.Array.from_buffers(_TS, n, [None, pa.py_buffer(start)]),
        pa.Array.from_buffers(_TS, n, [None, pa.py_buffer(end)]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(off)]),
        pa.Array.from_buffers(pa.date32(), n, [None, pa.py_buffer(day)]),
    )


class NativeColumns:
    """Wraps the C `Scanner`: Arrow arrays out of its buffers (no copy)."""

    def __init__(self) -> None:
        self.scanner = s = _Scanner()
        self.qadd, self.qmd, self.cadd = s.qadd, s.qmd, s.cadd
        self.qrows, self.crows = s.qrows, s.crows

    def take_quantity(self, rows: int) -> tuple[list[pa.Array], np.ndarray, pa.Array, pa.Array, Dates | None]:
        cols, md_rows, keys, vals, dates = self.scanner.take_quantity(rows)
        return [_arrow(c) for c in cols], np.frombuffer(md_rows, np.int32), _arrow(keys), _arrow(vals), _dates(dates)

    def take_categories(self) -> tuple[list[pa.Array], list[tuple[int, int]], Dates | None]:
        cols, lines, columns, dates = self.scanner.take_categories()
        at = list(zip(np.frombuffer(lines, np.int64).tolist(), np.frombuffer(columns, np.int32).tolist(), strict=True))
        return [_arrow(c) for c in cols], at, _dates(dates)


class ListColumns:
    """The pure-Python builder: lists of str (`NULL` for an absent attribute)."""

    def __init__(self) -> None:
        self._q: tuple[list[str], ...] = tuple([] for _ in range(7))
        self._md: tuple[list[Any], ...] = ([], [], [])
        self._c: tuple[list[str], ...] = tuple([] for _ in range(7))
        self._at: list[tuple[int, int]] = []
        q = self._q
        appends = tuple(c.append for c in q)

        def qadd(t: str, sn: str, dv: str, un: str, sd: str, ed: str, va: str) -> None:
            a0, a1, a2, a3, a4, a5, a6 = appends
            a0(t)
            a1(sn)
            a2(dv)
            a3(un)
            a4(sd)
            a5(ed)
            a6(va)

        md_rows, md_keys, md_vals = self._md

        def qmd(key: str, value: str) -> None:
            md_rows.append(len(q[0]) - 1)
            md_keys.append(key)
            md_vals.append(value)

        self.qadd = qadd
        self.qmd = qmd

    def qrows(self) -> int:
        return len(self._q[0])

    def crows(self) -> int:
        return len(self._c[0])

    def cadd(self, t: str, sn: str, dv: str, un: str, sd: str, ed: str, va: str, line: int, col: int) -> None:
        for c, v in zip(self._c, (t, sn, dv, un, sd, ed, va), strict=True):
            c.append(v)
        self._at.append((line, col))

    def take_quantity(self, rows: int) -> tuple[list[pa.Array], list[int], list[str], list[str], None]:
        cols = [strings(c[:rows]) for c in self._q]
        for c in self._q:
            del c[:rows]
        md_rows, md_keys, md_vals = self._md
        n = 0
        while n < len(md_rows) and md_rows[n] < rows:
            n += 1
        md = (md_rows[:n], md_keys[:n], md_vals[:n])
        del md_rows[:n], md_keys[:n], md_vals[:n]
        for i in range(len(md_rows)):
            md_rows[i] -= rows
        return cols, *md, None

    def take_categories(self) -> tuple[list[pa.Array], list[tuple[int, int]], None]:
        cols = [strings(c) for c in self._c]
        at = self._at
        for c in self._c:
            c.clear()
        self._at = []
        return cols, at, None


def columns() -> NativeColumns | ListColumns:
    return NativeColumns() if available() else ListColumns()


# -- when the native scanner may take over: after <HealthData ...>, in a plain UTF-8 file ---------
_ENCODING = re.compile(rb"""^(?:\xef\xbb\xbf)?\s*<\?xml[^>]*?\bencoding\s*=\s*["']([^"']*)["']""")
_ATTLIST = re.compile(
    rb"<!ATTLIST\s+(Record|MetadataEntry|HeartRateVariabilityMetadataList|InstantaneousBeatsPerMinute)\b([^>]*)>"
)
_PLAIN_ATTRS = re.compile(rb"(?:\s+[\w:.-]+\s+CDATA\s+#(?:REQUIRED|IMPLIED))*\s*")
_QUOTED_OR_TAG_END = re.compile(rb""""[^"]*"|'[^']*'|>""")


def root_tag_end(head: bytes) -> tuple[int, int] | None:
    """(start, end) of the first `<HealthData ...>` start tag in `head`, or None if it is
    not all there yet."""
    start = head.find(b"<HealthData")
    if start == -1:
        return None
    for m in _QUOTED_OR_TAG_END.finditer(head, start):
        if m.group() == b">":
            return start, m.end()
    return None


def prolog_allows_native(prolog: bytes) -> bool:
    """The text before the body: UTF-8, no entity declarations, and only plain CDATA
    attributes (no defaults, no normalisation) declared for the elements the scanner reads,
    so that it reads attribute values exactly as expat does."""
    if prolog.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in prolog or b"\r" in prolog:
        return False
    if prolog.startswith(b"\xef\xbb\xbf") and b"\n" not in prolog:
        return False
    m = _ENCODING.match(prolog)
    if m and m.group(1).lower() != b"utf-8":
        return False
    if b"<!ENTITY" in prolog:
        return False
    return all(_PLAIN_ATTRS.fullmatch(m.group(2)) for m in _ATTLIST.finditer(prolog))


def position_after(prolog: bytes) -> tuple[int, int]:
    """(line, column) as expat counts them (column 0-based, in characters) at the end of
    `prolog`."""
    line = prolog.count(b"\n") + 1
    tail = prolog[prolog.rfind(b"\n") + 1 :]
    return line, sum(1 for b in tail if b & 0xC0 != 0x80)


__all__ = ["NULL", "available", "columns", "prolog_allows_native", "position_after", "root_tag_end"]
