"""Streaming expat parser for export.xml: bytes in, record batches out.

Memory is flat: expat builds no tree; quantity Records go into column lists that are
converted and handed on every `BATCH_ROWS` rows; the other elements (category Records,
Workouts, ActivitySummary, Me, Correlation, clinical records) are few and become records
one by one. Only SleepAnalysis stage records are buffered to the end of the file, to group
them into nights (a few thousand a year).

Quantity Records take the fast path: the start-element handler only appends seven
attribute strings to lists; `columns.quantity_columns` does the per-row work in Arrow.
"""

from __future__ import annotations

import bisect
import json
import pyexpat
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

from common.records import RawRecord, RecordBatch, Sample, Workout
from connectors.healthkit import sleep as sleep_mod
from connectors.healthkit.columns import (
    NULL,
    ConversionError,
    category_columns,
    quantity_columns,
    strings,
)
from connectors.healthkit.types import (
    parse_date,
    snake,
)

BATCH_ROWS = 50_000
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


class ParseError(ValueError):
    """Content problem with a position (line, column) in the XML."""

    def __init__(self, line: int, column: int, detail: str):
        super().__init__(detail)
        self.line = line
        self.column = column


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

    def __init__(self, fetched_at: datetime | None = None):
        self.fetched_at = fetched_at or datetime.now(UTC)
        self.out: list[Any] = []
        self.stage_records: list[sleep_mod.StageRecord] = []
        self.locale: str | None = None
        self.export_date: str | None = None
        self._cols: tuple[list[Any], ...] = tuple([] for _ in range(7))
        self._cat: tuple[list[str], ...] = tuple([] for _ in range(7))  # category Records
        self._cat_at: list[tuple[int, int]] = []
        self._md: tuple[list[Any], ...] = ([], [], [])
        self._beats: dict[int, dict[str, Any]] = {}
        self._carry = b""  # text held back so that an HRV beat list is cut out whole
        self._stash: dict[str, str] = {}  # beat lists cut out (JSON text), by placeholder id
        self._stash_n = 0
        p = pyexpat.ParserCreate()
        p.buffer_text = True
        self._parser = p
        self._install_handlers()

    def _install_handlers(self) -> None:  # noqa: C901  (one closure, on purpose)
        p = self._parser
        types, sources, devices, units, starts, ends, values = self._cols
        ty, sn, dv, un, sd, ed, va = (c.append for c in self._cols)
        md_rows, md_keys, md_vals = self._md
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
                if t[2] == "Q":  # HKQuantityTypeIdentifier...
                    ty(t)
                    sn(a["sourceName"])
                    dv(a.get("device", NULL))
                    un(a.get("unit", NULL))
                    sd(a["startDate"])
                    ed(a["endDate"])
                    va(a.get("value", NULL))
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
                    md_rows.append(len(types) - 1)
                    md_keys.append(a.get("key", ""))
                    md_vals.append(a.get("value", ""))
                elif pending is not None:
                    pending["metadata"][a.get("key", "")] = a.get("value", "")
                return
            if name == "InstantaneousBeatsPerMinute":
                if in_quantity:
                    row = len(types) - 1
                    entry = beats.get(row)
                    if entry is None:
                        entry = beats[row] = {"attributes": last_attrs, "beats": []}
                    entry["beats"].append([a.get("time"), a.get("bpm")])
                return
            if name == "HeartRateVariabilityMetadataList":
                stashed = stash.pop(a.get(_STASH_ATTR, ""), None)
                if stashed and in_quantity:
                    row = len(types) - 1
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
            if pending is not None:
                finish_pending()

        def state() -> tuple[bool, int]:
            return in_quantity, records_seen

        p.StartElementHandler = start
        self._finish = finish
        self._state = state

    @property
    def records_seen(self) -> int:
        return self._state()[1]

    def _where(self) -> tuple[int, int]:
        """(line, column) in the file of the current expat position (1-based column)."""
        p = self._parser
        return p.CurrentLineNumber, p.CurrentColumnNumber + 1

    # -- feeding -------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
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

    def close(self) -> None:
        data, self._carry = self._carry, b""
        self._parse(_HRV_LIST.sub(self._cut_beats, data), True)
        self._finish()

    @property
    def pending_rows(self) -> int:
        return len(self._cols[0])

    def drain(self, final: bool = False) -> Iterator[Any]:
        """Records finished so far (and, once `final`, the sleep sessions)."""
        if self.out:
            out, self.out = self.out, []
            yield from out
        if final or len(self._cols[0]) >= BATCH_ROWS:
            batch = self._take_batch(final)
            if batch is not None:
                yield batch
            if self.out:  # raw rows of the batch's HRV beat lists
                out, self.out = self.out, []
                yield from out
        if self._cat_at and (final or len(self._cat_at) >= BATCH_ROWS // 4):
            yield self._take_categories()
        if final:
            yield from self._sleep_sessions()

    # -- quantity batches ----------------------------------------------------------------
    def _take_batch(self, final: bool) -> Any:
        n = len(self._cols[0])
        # The last Record may still get children (metadata, beats) in the next chunk.
        keep = 1 if (self._state()[0] and not final) else 0
        cut = n - keep
        if cut <= 0:
            return None
        cols = [c[:cut] for c in self._cols]
        for c in self._cols:
            del c[:cut]
        md_rows, md_keys, md_vals = self._md
        md_n = bisect.bisect_left(md_rows, cut)
        md = (md_rows[:md_n], md_keys[:md_n], md_vals[:md_n])
        del md_rows[:md_n], md_keys[:md_n], md_vals[:md_n]
        for i in range(len(md_rows)):
            md_rows[i] -= cut
        done_beats = [v for k, v in self._beats.items() if k < cut]
        rest = {k - cut: v for k, v in self._beats.items() if k >= cut}
        self._beats.clear()
        self._beats.update(rest)
        try:
            columns = quantity_columns(*map(strings, cols), md_rows=md[0], md_keys=md[1], md_vals=md[2])
        except ConversionError as exc:
            raise ParseError(0, 0, f"quantity Record {exc.row + 1} of a batch: {exc}") from None
        for entry in done_beats:
            self._raw_beats(entry)
        return RecordBatch(Sample, columns)

    def _raw_beats(self, entry: dict[str, Any]) -> None:
        """Land an HRV Record raw: {"attributes": ..., "beats": [[time, bpm], ...]}; beat
        lists cut out of the text arrive as JSON text already."""
        parts = entry["beats"]
        if all(isinstance(b, str) for b in parts):
            payload = '{"attributes":' + _dumps(entry["attributes"]) + ',"beats":[' + ",".join(parts) + "]}"
        else:  # mixed with beats read one by one by the handler (unusual text)
            beats = [x for b in parts for x in (json.loads("[" + b + "]") if isinstance(b, str) else [b])]
            payload = _dumps({"attributes": entry["attributes"], "beats": beats})
        self.out.append(RawRecord("healthkit", "record", _key(entry["attributes"]), payload, self.fetched_at))

    # -- the few, one at a time ----------------------------------------------------------
    def _raw(self, kind: str, natural_key: str, payload: Any) -> None:
        self.out.append(
            RawRecord(
                source="healthkit",
                kind=kind,
                natural_key=natural_key,
                payload=_dumps(payload),
                fetched_at=self.fetched_at,
            )
        )

    def _category_record(self, rec: dict[str, Any], at: tuple[int, int]) -> None:
        """A finished category Record: its strings go to the category columns (converted
        a batch at a time by `columns.category_columns`); with metadata it is also landed
        raw. `at` = its position, for the error message if a date is unreadable."""
        a = rec["attributes"]
        c = self._cat
        c[0].append(a["type"])
        c[1].append(a["sourceName"])
        c[2].append(a.get("device", NULL))
        c[3].append(a.get("unit", NULL))
        c[4].append(a["startDate"])
        c[5].append(a["endDate"])
        c[6].append(a.get("value", NULL))
        self._cat_at.append(at)
        if rec["metadata"]:
            self._raw("record", _key(a), rec)

    def _take_categories(self) -> Any:
        cols = [strings(c) for c in self._cat]
        at = self._cat_at
        self._cat = tuple([] for _ in range(7))
        self._cat_at = []
        try:
            columns = category_columns(*cols)
        except ConversionError as exc:
            row = exc.row
            for k in (4, 5):  # which date, and parse_date's own message
                try:
                    parse_date(cols[k][row].as_py())
                except ValueError as err:
                    raise ParseError(*at[row], str(err)) from None
            raise ParseError(*at[row], str(exc)) from None
        self.stage_records.extend(sleep_mod.stage_records(columns))
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
        yield from sleep_mod.sessions(self.stage_records)
        self.stage_records = []


_ENERGY = {"kcal": 1.0, "Cal": 1.0, "kJ": 1 / 4.184, "cal": 0.001}
_DIST = {"m": 1.0, "km": 1000.0, "mi": 1609.344, "ft": 0.3048, "yd": 0.9144}


def _dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _convert(value: float | None, unit: str | None, table: dict[str, float]) -> float | None:
    if value is None:
        return None
    return value * table.get(unit or "", 1.0)
