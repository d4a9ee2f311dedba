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
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

from common.records import RawRecord, RecordBatch, Sample, Workout
from connectors.healthkit import sleep as sleep_mod
from connectors.healthkit.columns import ConversionError, quantity_columns
from connectors.healthkit.types import (
    MINDFUL_TYPE,
    SLEEP_STAGES,
    SLEEP_TYPE,
    STAND_HOUR_TYPE,
    parse_date,
    parse_device,
    snake,
)

BATCH_ROWS = 50_000
_FRAGMENT_OPEN = b"<HealthDataFragment>"
_FRAGMENT_CLOSE = b"</HealthDataFragment>"

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
        self._md: tuple[list[Any], ...] = ([], [], [])
        self._beats: dict[int, dict[str, Any]] = {}
        self._seen = 0  # Records seen by finished handler sets (fragments)
        self._line_off = 0  # position of the parsed text in the file (fragments)
        self._col_off = 0
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
        raw = self._raw
        in_quantity = False  # the last started element is a quantity Record
        last_attrs: dict[str, str] = {}
        pending: dict[str, Any] | None = None  # a category Record waiting for its children
        nest: list[dict[str, Any]] = []  # open Workout / container payloads
        depth = 0  # element depth inside nest[0]
        records_seen = 0

        def finish_pending() -> None:
            nonlocal pending
            rec, pending = pending, None
            self._category_record(rec)  # type: ignore[arg-type]

        def start(name: str, a: dict[str, str]) -> None:
            nonlocal in_quantity, last_attrs, pending, depth, records_seen
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
                    dv(a.get("device"))
                    un(a.get("unit"))
                    sd(a["startDate"])
                    ed(a["endDate"])
                    va(a.get("value"))
                    last_attrs = a
                    in_quantity = True
                else:
                    pending = {"attributes": a, "metadata": {}}
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
        return self._seen + self._state()[1]

    def _where(self) -> tuple[int, int]:
        """(line, column) in the file of the current expat position (1-based column)."""
        p = self._parser
        line, col = p.CurrentLineNumber, p.CurrentColumnNumber + 1
        if self._line_off or self._col_off:
            if line == 1:
                col += self._col_off - len(_FRAGMENT_OPEN)
            line += self._line_off
        return line, col

    def parse_fragment(self, data: bytes, line: int, column: int) -> None:
        """Parse complete top-level elements (HealthData children) taken from the file at
        (line, column 0-based) with the same handlers, on a fresh expat parser. The
        document was already checked for well-formedness; this only extracts."""
        self._seen += self._state()[1]
        p = pyexpat.ParserCreate()
        p.buffer_text = True
        self._parser = p
        self._line_off, self._col_off = line - 1, column
        self._install_handlers()
        try:
            p.Parse(_FRAGMENT_OPEN + data + _FRAGMENT_CLOSE, True)
        except pyexpat.ExpatError as exc:
            self._parser = p
            raise ParseError(*self._where(), pyexpat.ErrorString(exc.code)) from None
        except KeyError as exc:
            raise ParseError(*self._where(), f"element lacks required attribute {exc.args[0]!r}") from None
        self._finish()

    # -- feeding -------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        try:
            self._parser.Parse(chunk, False)
        except pyexpat.ExpatError as exc:
            raise ParseError(exc.lineno, exc.offset + 1, pyexpat.ErrorString(exc.code)) from None
        except KeyError as exc:
            raise ParseError(*self._where(), f"element lacks required attribute {exc.args[0]!r}") from None

    def close(self) -> None:
        try:
            self._parser.Parse(b"", True)
        except pyexpat.ExpatError as exc:
            raise ParseError(exc.lineno, exc.offset + 1, pyexpat.ErrorString(exc.code)) from None
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
            columns = quantity_columns(*cols, md_rows=md[0], md_keys=md[1], md_vals=md[2])
        except ConversionError as exc:
            raise ParseError(0, 0, f"quantity Record {exc.row + 1} of a batch: {exc}") from None
        for entry in done_beats:
            self._raw("record", _key(entry["attributes"]), entry)
        return RecordBatch(Sample, columns)

    # -- the few, one at a time ----------------------------------------------------------
    def _raw(self, kind: str, natural_key: str, payload: Any) -> None:
        self.out.append(
            RawRecord(
                source="healthkit",
                kind=kind,
                natural_key=natural_key,
                payload=json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
                fetched_at=self.fetched_at,
            )
        )

    def _category_record(self, rec: dict[str, Any]) -> None:
        a = rec["attributes"]
        t = a["type"]
        try:
            start, off = parse_date(a["startDate"])
            end, _ = parse_date(a["endDate"])
        except ValueError as exc:
            raise ParseError(*self._where(), str(exc)) from None
        minutes = (end - start).total_seconds() / 60.0
        raw_value = a.get("value")
        unit = a.get("unit")
        detail = None
        if t == SLEEP_TYPE:
            stage = SLEEP_STAGES.get(raw_value or "", snake(raw_value or "unknown"))
            metric, value, unit, detail = "sleep_stage", minutes, "min", stage
            self.stage_records.append(
                sleep_mod.StageRecord(a["sourceName"], stage, start, end, off)
            )
        elif t == MINDFUL_TYPE:
            metric, value, unit = "mindful", minutes, "min"
        elif t == STAND_HOUR_TYPE:
            stood = (raw_value or "").endswith("Stood")
            metric, value, unit = "stand_hour", 1.0 if stood else 0.0, "count"
            detail = "stood" if stood else "idle"
        else:
            metric = snake(t)
            value = _num(raw_value)
            if value is None and raw_value is not None:
                detail = raw_value.removeprefix("HKCategoryValue")
        self.out.append(
            Sample(
                source="healthkit",
                metric=metric,
                start_ts=start,
                end_ts=end,
                value=value,  # type: ignore[arg-type]
                unit=unit or "",
                local_day=start.date(),
                source_name=a["sourceName"],
                device=parse_device(a.get("device")),
                tz_offset_min=off,
                detail=detail,
            )
        )
        if rec["metadata"]:
            self._raw("record", _key(a), rec)

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


def _convert(value: float | None, unit: str | None, table: dict[str, float]) -> float | None:
    if value is None:
        return None
    return value * table.get(unit or "", 1.0)
