"""Streaming expat parser for export.xml: bytes in, record batches out.

Memory is flat: expat builds no tree; quantity Records go into column lists that are
converted and handed on every `BATCH_ROWS` rows; the other elements (category Records,
Workouts, ActivitySummary, Me, Correlation, clinical records) are few and become records
one by one. Only SleepAnalysis stage records are buffered to the end of the file, to group
them into nights (a few thousand a year).

Quantity Records take the fast path: the start-element handler only appends seven
attribute strings to lists; `columns.quantity_columns` does the per-row work in Arrow.

With the C extension built (`native.available()`), expat reads only the prolog and what the
native scanner (`_scan.c`) leaves: the scanner takes the plain Records of the body into
the same columns itself and hands back every other item, padded so that expat's line and
column numbers stay the file's (README "The native Record scanner").
"""

from __future__ import annotations

import json
import pyexpat
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

from common.records import RawRecord, RecordBatch, Sample, Skipped, Workout
from common.timeutil import in_sane_range, out_of_range_detail
from connectors.healthkit import native
from connectors.healthkit import sleep as sleep_mod
from connectors.healthkit.columns import (
    NULL,
    ConversionError,
    RangeError,
    category_columns,
    quantity_columns,
    screen_rows,
)
from connectors.healthkit.types import (
    parse_date,
    snake,
)

BATCH_ROWS = 50_000
# Raw payloads (HRV beat lists, category Records with metadata, workouts...) are handed on
# as one columnar RecordBatch(RawRecord) per this many rows (in file order), not one object
# each: ~130 k of them per million Records.
RAW_BATCH_ROWS = 10_000
# A whole HRV beat list in the plain form Apple writes: values need no XML decoding and no
# JSON escaping (no entity, quote, backslash or control character).
_HRV_LIST = re.compile(
    rb"<HeartRateVariabilityMetadataList>((?:\s*<InstantaneousBeatsPerMinute "
    rb'bpm="[^"<&\\\x00-\x1f]*" time="[^"<&\\\x00-\x1f]*"\s*/>)*+)\s*</HeartRateVariabilityMetadataList>'
)
_STASH_ATTR = "rhythm-beats"
_MAX_HOLD = 16 << 20  # a beat list longer than this is left to the handlers (memory stays flat)

# Elements whose attributes (and children) are landed raw, one raw row each.
_RAW_CONTAINERS = {"Correlation", "ClinicalRecord", "Audiogram", "VisionPrescription"}
_MAX_PROLOG = 4 << 20  # no <HealthData> start tag in this much text: expat alone reads the file

# How the bytes go in: expat only; or the prolog to expat, then the native scanner for the
# body (handing expat what it does not take); see `_feed_native`.
_EXPAT, _PROLOG, _NATIVE = "expat", "prolog", "native"


class ParseError(ValueError):
    """Content problem with a position (line, column) in the XML, or `where` in words for a
    quantity Record (whose line is not kept); `xml=False`: well-formed XML, unusable value."""

    def __init__(self, line: int, column: int, detail: str, *, where: str | None = None, xml: bool = True):
        super().__init__(detail)
        self.line = line
        self.column = column
        self.where = where
        self.xml = xml


def _num(v: str | None) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except ValueError:
        return None


def _key(a: dict[str, str]) -> str:
    return f"{a.get('type', '')}|{a.get('sourceName', '')}|{a.get('startDate', '')}|{a.get('endDate', '')}"


class ExportParser:
    """Feed bytes with `feed()`; collect finished records with `drain()`; `close()` at EOF.

    The start-element handler is a closure over local lists (the hot path for millions of
    Records). An end-element handler is installed only while inside a Workout or a
    Correlation-like container (a few elements), since expat calls it for every element.
    """

    def __init__(self, fetched_at: datetime | None = None, use_native: bool | None = None):
        self.fetched_at = fetched_at or datetime.now(UTC)
        self.out: list[Any] = []
        self._raw_cols: tuple[list[str], list[str], list[str]] = ([], [], [])  # kind, key, payload
        self.stages = sleep_mod.StageColumns()  # sleep stage rows, grouped at the end
        self.locale: str | None = None
        self.export_date: str | None = None
        if use_native is None:
            use_native = native.available()
        self._cols = native.NativeColumns() if use_native else native.ListColumns()
        self._scanner = self._cols.scanner if use_native else None
        self._mode = _PROLOG if use_native else _EXPAT
        self._head = b""  # the prolog so far (native mode, before the body starts)
        self._nbuf = b""  # body bytes the scanner has not finished with
        self._nbase = 0  # stream offset of _nbuf[0]
        self._beats: dict[int, Any] = {}
        self._carry = b""  # text held back so that an HRV beat list is cut out whole
        self._stash: dict[str, str] = {}  # beat lists cut out (JSON text), by placeholder id
        self._stash_n = 0
        self._q_taken = 0  # quantity Records handed on so far (their number names one in errors)
        self._skips: dict[str, int] = {}  # rows left out since the last drain, by reason
        p = pyexpat.ParserCreate()
        p.buffer_text = True
        self._parser = p
        self._install_handlers()

    def _install_handlers(self) -> None:  # noqa: C901  (one closure, on purpose)
        p = self._parser
        cols = self._cols
        qadd, qmd, qrows = cols.qadd, cols.qmd, cols.qrows
        beats = self._beats
        stash = self._stash
        raw = self._raw
        in_quantity = False  # the last started element is a quantity Record
        last_attrs: dict[str, str] = {}
        pending: dict[str, Any] | None = None  # a category Record waiting for its children
        pending_at = (0, 0)
        nest: list[dict[str, Any]] = []  # open Workout / container payloads
        depth = 0  # element depth inside nest[0]
        records_seen = 0

        def finish_pending() -> None:
            nonlocal pending
            rec, pending = pending, None
            self._category_record(rec, pending_at)  # type: ignore[arg-type]

        def start(name: str, a: dict[str, str]) -> None:
            nonlocal in_quantity, last_attrs, pending, pending_at, depth, records_seen
            if name == "Record":
                records_seen += 1
                if pending is not None:
                    finish_pending()
                if depth:
                    depth += 1
                    nest[0].setdefault("records", []).append(a)
                    in_quantity = False
                    return
                t = a["type"]
                if t[2:3] == "Q":  # HKQuantityTypeIdentifier...
                    qadd(
                        t,
                        a["sourceName"],
                        a.get("device", NULL),
                        a.get("unit", NULL),
                        a["startDate"],
                        a["endDate"],
                        a.get("value", NULL),
                    )
                    last_attrs = a
                    in_quantity = True
                else:
                    pending = {"attributes": a, "metadata": {}}
                    pending_at = self._where()
                    in_quantity = False
                return
            if name == "MetadataEntry":
                if depth:
                    depth += 1
                    nest[-1]["metadata"][a.get("key", "")] = a.get("value", "")
                elif in_quantity:
                    qmd(a.get("key", ""), a.get("value", ""))
                elif pending is not None:
                    pending["metadata"][a.get("key", "")] = a.get("value", "")
                return
            if name == "InstantaneousBeatsPerMinute":
                if in_quantity:
                    row = qrows() - 1
                    entry = beats.get(row)
                    if entry is None:
                        entry = beats[row] = {"attributes": last_attrs, "beats": []}
                    entry["beats"].append([a.get("time"), a.get("bpm")])
                return
            if name == "HeartRateVariabilityMetadataList":
                stashed = stash.pop(a.get(_STASH_ATTR, ""), None)
                if stashed and in_quantity:
                    row = qrows() - 1
                    entry = beats.get(row)
                    if entry is None:
                        entry = beats[row] = {"attributes": last_attrs, "beats": []}
                    entry["beats"].append(stashed)
                return
            in_quantity = False
            if pending is not None:
                finish_pending()
            if depth:
                depth += 1
                self._workout_child(nest, name, a)
                return
            if name == "Workout":
                nest.append(
                    {"attributes": a, "metadata": {}, "statistics": [], "events": [], "routes": [], "activities": []}
                )
                depth = 1
                p.EndElementHandler = end
            elif name in _RAW_CONTAINERS:
                nest.append({"element": name, "attributes": a, "metadata": {}})
                depth = 1
                p.EndElementHandler = end
            elif name == "ActivitySummary":
                self._activity_summary(a)
            elif name == "HealthData":
                self.locale = a.get("locale")
            elif name == "ExportDate":
                self.export_date = a.get("value")
                raw("export", "export", {"locale": self.locale, "export_date": self.export_date})
            elif name == "Me":
                raw("me", "me", a)

        def end(name: str) -> None:
            nonlocal depth
            depth -= 1
            if name == "WorkoutActivity" and len(nest) > 1:
                nest.pop()
            if depth == 0:
                p.EndElementHandler = None
                top = nest.pop()
                nest.clear()
                if "element" in top:
                    raw(snake(top["element"]), _key(top["attributes"]) or top["element"], top)
                else:
                    self._finish_workout(top)

        def finish() -> None:
            nonlocal in_quantity
            if pending is not None:
                finish_pending()
            in_quantity = False

        def state() -> tuple[bool, int, bool]:
            return in_quantity, records_seen, pending is not None

        p.StartElementHandler = start
        self._finish = finish
        self._state = state

    @property
    def records_seen(self) -> int:
        native_records = self._scanner.records() if self._scanner is not None else 0
        return self._state()[1] + native_records

    def _where(self) -> tuple[int, int]:
        """(line, column) in the file of the current expat position (1-based column)."""
        p = self._parser
        return p.CurrentLineNumber, p.CurrentColumnNumber + 1

    # -- feeding -------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        if self._mode is _NATIVE:
            self._feed_native(chunk, False)
        elif self._mode is _PROLOG:
            self._feed_prolog(chunk, False)
        else:
            self._feed_expat(chunk)

    def close(self) -> None:
        if self._mode is _PROLOG:
            self._feed_prolog(b"", True)
        if self._mode is _NATIVE:
            self._feed_native(b"", True)  # may hand the rest to expat
        if self._mode is _NATIVE:
            self._parse(_padding(self._scanner.pad()), True)  # type: ignore[union-attr]
        else:
            data, self._carry = self._carry, b""
            self._parse(_HRV_LIST.sub(self._cut_beats, data), True)
        try:
            self._finish()
        except KeyError as exc:  # the last element: a category Record without a required attribute
            raise ParseError(*self._where(), f"element lacks required attribute {exc.args[0]!r}") from None

    def _feed_prolog(self, chunk: bytes, final: bool) -> None:
        """Until the body starts: hold the bytes; then give expat the prolog (through the
        `<HealthData ...>` start tag) and the scanner the rest."""
        head = self._head = self._head + chunk
        found = native.root_tag_end(head)
        if found is None:
            if final or len(head) > _MAX_PROLOG:
                self._to_expat(head)
            return
        start, end = found
        prolog = head[:end]
        if head[end - 2 : end] == b"/>" or not native.prolog_allows_native(prolog):
            self._to_expat(head)
            return
        self._head = b""
        p = self._parser
        handler = p.StartElementHandler
        started: list[tuple[str, int]] = []

        def watch(name: str, a: dict[str, str]) -> None:
            started.append((name, p.CurrentByteIndex))
            handler(name, a)

        p.StartElementHandler = watch
        try:
            self._parse(prolog, False)
        finally:
            p.StartElementHandler = handler
        if started != [("HealthData", start)]:  # that tag was not the root's start tag
            self._to_expat(head[end:])
            return
        line, col = native.position_after(prolog)
        self._scanner.set_position(end, line, col)  # type: ignore[union-attr]
        self._mode, self._nbuf, self._nbase = _NATIVE, b"", end
        self._feed_native(head[end:], final)

    def _to_expat(self, data: bytes) -> None:
        self._mode = _EXPAT
        self._head = self._nbuf = b""
        self._feed_expat(data)

    def _feed_native(self, chunk: bytes, final: bool) -> None:
        """The scanner takes the Records it reads whole; expat gets every other item (and
        any Record the scanner leaves), after padding that keeps its line and column."""
        scanner = self._scanner
        assert scanner is not None
        buf = self._nbuf + chunk if self._nbuf else chunk
        base = self._nbase
        if b"\r" in chunk:  # expat's CR/LF rules: the rest goes to expat alone
            self._parse(_padding(scanner.pad()), False)
            self._to_expat(buf)
            return
        pos = 0
        while True:
            # A category Record read by expat is finished by the next element's start (its
            # errors name that place): then that element goes to expat as well.
            waiting = self._state()[2]
            status, a, b, pad = scanner.scan(buf, base, pos, final, waiting)
            self._take_native_raw()
            if status == 0:  # the scanner needs more bytes (everything before `a` was taken)
                self._nbuf, self._nbase = buf[a:], base + a
                return
            if status == 3:  # from `a` on, expat reads alone
                self._parse(_padding(pad), False)
                self._to_expat(buf[a:])
                return
            self._parse(_padding(pad) + buf[a:b], False)
            if not self._state()[2]:
                self._finish()  # the next item is no child of a Record read there
            if status == 2:  # the root's end tag: what follows is expat's
                self._to_expat(buf[b:])
                return
            pos = b

    def _take_native_raw(self) -> None:
        raws, hrv = self._scanner.take_raw()  # type: ignore[union-attr]
        if raws:
            kinds, keys, payloads = self._raw_cols
            kinds.extend(["record"] * len(raws))
            keys.extend(k for k, _ in raws)
            payloads.extend(p for _, p in raws)
        for row, key, payload in hrv:
            self._beats[row] = (key, payload)

    def _feed_expat(self, chunk: bytes) -> None:
        if not self._carry and b"<HeartRateVariabilityMetadataList" not in chunk:
            self._parse(chunk, False)  # no beat list here (one cut by the chunk end is read as is)
            return
        data = self._carry + chunk
        cut = data.rfind(b"<")  # a tag may be cut by the chunk end: hold it back
        start = data.rfind(b"<HeartRateVariabilityMetadataList", 0, cut + 1)
        if start != -1:
            close = data.find(b"</HeartRateVariabilityMetadataList", start)
            if (close == -1 or data.find(b">", close) == -1) and len(data) - start < _MAX_HOLD:
                cut = start  # an unfinished beat list waits for the next chunk
        if cut <= 0:
            cut = len(data) if cut == -1 else 0
        self._carry = data[cut:]
        self._parse(_HRV_LIST.sub(self._cut_beats, data[:cut]), False)

    def _cut_beats(self, m: re.Match[bytes]) -> bytes:
        """Replace a well-formed HRV beat list by an empty placeholder element carrying an
        id, padded so that every later line and column keeps its place in error messages;
        its beats are read here at C speed instead of one expat callback per beat."""
        block = m.group()
        key = str(self._stash_n + 1)
        tag = f'<HeartRateVariabilityMetadataList {_STASH_ATTR}="{key}"/>'.encode()
        nl = block.count(b"\n")
        if nl == 0 and len(block) < len(tag):
            return block  # no room for the placeholder on its line: read by the handler
        try:
            text = m.group(1).decode("utf-8")
        except UnicodeDecodeError:
            return block  # left to expat, which reports it
        self._stash_n += 1
        parts = text.split('"')  # ... bpm=|62| time=|00:20:37,80| />...
        self._stash[key] = ",".join(map('["{}","{}"]'.format, parts[3::4], parts[1::4]))
        if nl == 0:
            return tag + b" " * (len(block) - len(tag))
        return tag + b"\n" * nl + b" " * (len(block) - block.rfind(b"\n") - 1)

    def _parse(self, data: bytes, final: bool) -> None:
        try:
            self._parser.Parse(data, final)
        except pyexpat.ExpatError as exc:
            raise ParseError(exc.lineno, exc.offset + 1, pyexpat.ErrorString(exc.code)) from None
        except KeyError as exc:
            raise ParseError(*self._where(), f"element lacks required attribute {exc.args[0]!r}") from None
        except LookupError as exc:  # an encoding expat does not know, declared in the prolog
            raise ParseError(*self._where(), str(exc).splitlines()[0][:200], xml=False) from None

    @property
    def pending_rows(self) -> int:
        return self._cols.qrows()

    def drain(self, final: bool = False) -> Iterator[Any]:
        """Records finished so far (and, once `final`, the sleep sessions)."""
        if self.out:
            out, self.out = self.out, []
            yield from out
        if final or self._cols.qrows() >= BATCH_ROWS:
            batch = self._take_batch(final)
            if batch is not None:
                yield batch
        if final or len(self._raw_cols[0]) >= RAW_BATCH_ROWS:
            raw = self._take_raw()
            if raw is not None:
                yield raw
        crows = self._cols.crows()
        if crows and (final or crows >= BATCH_ROWS // 4):
            yield self._take_categories()
        if final:
            yield from self._sleep_sessions()
        if self._skips:
            skips, self._skips = self._skips, {}
            for reason, n in skips.items():
                yield Skipped("healthkit", reason, n)

    def _screen(self, columns: dict[str, Any]) -> dict[str, Any]:
        """Leave out (and count) rows with a NaN/infinite value or an end before the start."""
        columns, skipped = screen_rows(columns)
        for reason, n in skipped.items():
            self._skips[reason] = self._skips.get(reason, 0) + n
        return columns

    def _take_raw(self) -> RecordBatch | None:
        kinds, keys, payloads = self._raw_cols
        if not kinds:
            return None
        self._raw_cols = ([], [], [])
        n = len(kinds)
        return RecordBatch(RawRecord, {
            "source": ["healthkit"] * n, "kind": kinds, "natural_key": keys, "payload": payloads,
            "fetched_at": [self.fetched_at] * n,
        })

    def _raw_row(self, kind: str, natural_key: str, payload: str) -> None:
        """Land a payload (JSON text) raw, in file order with every other raw row."""
        kinds, keys, payloads = self._raw_cols
        kinds.append(kind)
        keys.append(natural_key)
        payloads.append(payload)

    # -- quantity batches ----------------------------------------------------------------
    def _take_batch(self, final: bool) -> Any:
        n = self._cols.qrows()
        # The last Record may still get children (metadata, beats) in the next chunk.
        keep = 1 if (self._state()[0] and not final) else 0
        cut = n - keep
        if cut <= 0:
            return None
        cols, md_rows, md_keys, md_vals, dates = self._cols.take_quantity(cut)
        done_beats = [v for k, v in self._beats.items() if k < cut]
        rest = {k - cut: v for k, v in self._beats.items() if k >= cut}
        self._beats.clear()
        self._beats.update(rest)
        taken, self._q_taken = self._q_taken, self._q_taken + cut
        try:
            columns = quantity_columns(*cols, md_rows=md_rows, md_keys=md_keys, md_vals=md_vals, dates=dates)
        except ConversionError as exc:
            row = exc.row
            what = f"quantity Record {taken + row + 1:,}: {cols[0][row].as_py()} from {cols[1][row].as_py()!r}"
            raise ParseError(0, 0, str(exc), where=what, xml=not isinstance(exc, RangeError)) from None
        for entry in done_beats:
            self._raw_beats(entry)
        return RecordBatch(Sample, self._screen(columns))

    def _raw_beats(self, entry: dict[str, Any] | tuple[str, str]) -> None:
        """Land an HRV Record raw: {"attributes": ..., "beats": [[time, bpm], ...]}; beat
        lists cut out of the text arrive as JSON text already, and the native scanner's
        as (natural key, payload)."""
        if isinstance(entry, tuple):
            self._raw_row("record", entry[0], entry[1])
            return
        parts = entry["beats"]
        if all(isinstance(b, str) for b in parts):
            payload = '{"attributes":' + _dumps(entry["attributes"]) + ',"beats":[' + ",".join(parts) + "]}"
        else:  # mixed with beats read one by one by the handler (unusual text)
            beats = [x for b in parts for x in (json.loads("[" + b + "]") if isinstance(b, str) else [b])]
            payload = _dumps({"attributes": entry["attributes"], "beats": beats})
        self._raw_row("record", _key(entry["attributes"]), payload)

    # -- the few, one at a time ----------------------------------------------------------
    def _raw(self, kind: str, natural_key: str, payload: Any) -> None:
        self._raw_row(kind, natural_key, _dumps(payload))

    def _category_record(self, rec: dict[str, Any], at: tuple[int, int]) -> None:
        """A finished category Record: its strings go to the category columns (converted
        a batch at a time by `columns.category_columns`); with metadata it is also landed
        raw. `at` = its position, for the error message if a date is unreadable."""
        a = rec["attributes"]
        self._cols.cadd(
            a["type"],
            a["sourceName"],
            a.get("device", NULL),
            a.get("unit", NULL),
            a["startDate"],
            a["endDate"],
            a.get("value", NULL),
            *at,
        )
        if rec["metadata"]:
            self._raw("record", _key(a), rec)

    def _take_categories(self) -> Any:
        cols, at, dates = self._cols.take_categories()
        try:
            columns = category_columns(*cols, dates=dates)
        except RangeError as exc:
            raise ParseError(*at[exc.row], str(exc), xml=False) from None
        except ConversionError as exc:
            row = exc.row
            for k in (4, 5):  # which date, and parse_date's own message
                try:
                    parse_date(cols[k][row].as_py())
                except ValueError as err:
                    raise ParseError(*at[row], str(err)) from None
            raise ParseError(*at[row], str(exc)) from None
        columns = self._screen(columns)
        self.stages.add(columns)
        return RecordBatch(Sample, columns)

    def _workout_child(self, nest: list[dict[str, Any]], name: str, a: dict[str, str]) -> None:
        w = nest[-1]
        if "element" in nest[0]:  # inside a Correlation / ClinicalRecord / Audiogram ...
            nest[0].setdefault("children", []).append({"element": name, **a})
            return
        if name == "WorkoutStatistics":
            w["statistics"].append(a)
        elif name == "WorkoutEvent":
            w["events"].append(a)
        elif name == "WorkoutRoute":
            nest[0]["routes"].append({**a, "files": [], "locations": 0})
        elif name == "FileReference" and nest[0]["routes"]:
            nest[0]["routes"][-1]["files"].append(a.get("path"))
        elif name == "Location" and nest[0]["routes"]:
            nest[0]["routes"][-1]["locations"] += 1  # old exports inline GPS points: counted
        elif name == "WorkoutActivity":
            act = {"attributes": a, "metadata": {}, "statistics": [], "events": []}
            nest[0]["activities"].append(act)
            nest.append(act)  # its children (statistics, events, metadata) go to it
        else:
            nest[0].setdefault("other", []).append({"element": name, **a})

    def _finish_workout(self, w: dict[str, Any]) -> None:
        a = w["attributes"]
        key = _key({**a, "type": a.get("workoutActivityType", "")})
        self._raw("workout", key, w)
        try:
            start, off = parse_date(a["startDate"])
            end, _ = parse_date(a["endDate"])
        except (KeyError, ValueError) as exc:
            raise ParseError(*self._where(), f"Workout: {exc}") from None
        for ts, what in ((start, "startDate"), (end, "endDate")):
            if not in_sane_range(ts):
                raise ParseError(*self._where(), "Workout: " + out_of_range_detail(what, repr(a[what])), xml=False)
        duration = _num(a.get("duration"))
        if duration is not None:
            duration *= {"min": 1.0, "s": 1 / 60, "hr": 60.0}.get(a.get("durationUnit", "min"), 1.0)
        energy = distance = avg_hr = max_hr = None
        for s in w["statistics"]:
            st = s.get("type", "")
            if st.endswith("ActiveEnergyBurned"):
                energy = _convert(_num(s.get("sum")), s.get("unit"), _ENERGY)
            elif st.startswith("HKQuantityTypeIdentifierDistance") and distance is None:
                distance = _convert(_num(s.get("sum")), s.get("unit"), _DIST)
            elif st.endswith("IdentifierHeartRate"):
                avg_hr = _num(s.get("average"))
                max_hr = _num(s.get("maximum"))
        if energy is None:
            energy = _convert(_num(a.get("totalEnergyBurned")), a.get("totalEnergyBurnedUnit"), _ENERGY)
        if distance is None:
            distance = _convert(_num(a.get("totalDistance")), a.get("totalDistanceUnit"), _DIST)
        self.out.append(
            Workout(
                source="healthkit",
                workout_id=key,
                start_ts=start,
                end_ts=end,
                local_day=start.date(),
                sport=snake(a.get("workoutActivityType", "unknown").removeprefix("HKWorkoutActivityType")),
                duration_min=duration,
                energy_kcal=energy,
                distance_m=distance,
                avg_hr_bpm=avg_hr,
                max_hr_bpm=max_hr,
                tz_offset_min=off,
                source_name=a.get("sourceName", ""),
            )
        )

    def _activity_summary(self, a: dict[str, str]) -> None:
        day_text = a.get("dateComponents", "")
        self._raw("activity_summary", day_text, a)
        try:
            day = date.fromisoformat(day_text)
        except ValueError:
            return  # kept raw; no dated rows without a readable day
        if not in_sane_range(day):
            raise ParseError(*self._where(), "ActivitySummary: " + out_of_range_detail("dateComponents", repr(day_text)), xml=False)
        # The Activity rings' own daily figures (already de-duplicated by the phone).
        midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
        unit_energy = a.get("activeEnergyBurnedUnit", "kcal")
        fields = {
            "ring_active_energy": (_convert(_num(a.get("activeEnergyBurned")), unit_energy, _ENERGY), "kcal"),
            "ring_active_energy_goal": (_convert(_num(a.get("activeEnergyBurnedGoal")), unit_energy, _ENERGY), "kcal"),
            "ring_exercise_time": (_num(a.get("appleExerciseTime")), "min"),
            "ring_exercise_time_goal": (_num(a.get("appleExerciseTimeGoal")), "min"),
            "ring_stand_hours": (_num(a.get("appleStandHours")), "count"),
            "ring_stand_hours_goal": (_num(a.get("appleStandHoursGoal")), "count"),
            "ring_move_time": (_num(a.get("appleMoveTime", a.get("appleMoveMinutes"))), "min"),
            "ring_move_time_goal": (_num(a.get("appleMoveTimeGoal", a.get("appleMoveMinutesGoal"))), "min"),
        }
        for metric, (value, unit) in fields.items():
            if value is None:
                continue
            self.out.append(
                Sample(
                    source="healthkit",
                    metric=metric,
                    start_ts=midnight,
                    end_ts=midnight,
                    value=value,
                    unit=unit,
                    local_day=day,
                    source_name="Activity",
                    tz_offset_min=None,  # the summary carries a day, not an offset
                )
            )

    def _sleep_sessions(self) -> Iterator[Any]:
        stages, self.stages = self.stages, sleep_mod.StageColumns()
        yield from stages.sessions()


_ENERGY = {"kcal": 1.0, "Cal": 1.0, "kJ": 1 / 4.184, "cal": 0.001}
_DIST = {"m": 1.0, "km": 1000.0, "mi": 1609.344, "ft": 0.3048, "yd": 0.9144}


def _padding(pad: tuple[int, int]) -> bytes:
    """Newlines and spaces that move expat to the scanner's line and column."""
    return b"\n" * pad[0] + b" " * pad[1]


def _dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _convert(value: float | None, unit: str | None, table: dict[str, float]) -> float | None:
    if value is None:
        return None
    return value * table.get(unit or "", 1.0)
