"""One Health Auto Export JSON payload (a file, or a REST push) -> records.

``{"data": {"metrics": [...], "workouts": [...], "stateOfMind": [...], ...}}``:

- ``metrics[]``: ``{"name", "units", "data": [point, ...]}``; a point is ``{"date", "qty",
  "source"}``, heart rate ``{"date", "Min", "Avg", "Max", "source"}``, sleep one of the two
  forms of connectors/hae/sleep.py. Known metrics become ``samples`` (series.py: buckets and
  keys); every metric, known or not, is kept raw, in ``raw_hae`` rows of one metric's points
  of one local hour (at most 120 a row), kind ``metric``, key ``<name>|<first point's
  date>``, payload ``{"name", "units", "data": [the points exactly as received]}`` (a later,
  longer export of the same hour starts at the same point and replaces it; a "since last
  sync" push starts later and is kept beside it).
- ``workouts[]``: ``Workout`` rows (workouts.py), each kept raw (kind ``workout``).
- any other array (``stateOfMind``, ``medications``, ``symptoms``, ``ecg``, ...): kept raw,
  one row per element, kind the array's name, key its ``id`` or a hash of its text.

The document is walked element by element (jsonwalk.py): a year in one file never becomes
one Python tree. Every problem is one ``SourceFormatError`` naming the file, the JSON path
and the line and column.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from common.errors import SourceFormatError
from common.records import RawRecord
from connectors.hae import sleep as sleep_mod
from connectors.hae.dates import BadDate, instant
from connectors.hae.jsonwalk import JsonDoc
from connectors.hae.metrics import JSON_METRICS, SLEEP, conversion, known_units
from connectors.hae.series import SOURCE, Series, devices, emit, hr_detail
from connectors.hae.workouts import from_json as workout_from_json


@dataclass
class Context:
    name: str  # the file (or push) named in errors
    fetched_at: datetime
    aggregation: str | None = None  # the REST push's automation-aggregation header
    zone: tzinfo | None = None  # CSV wall times (None: this machine's zone)


def raw_key(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


CHUNK_POINTS = 120  # points per raw row at most (see _Chunks)


@dataclass
class _Chunks:
    """A metric's raw points of one payload, in pieces: by local hour (the date's first 13
    characters), in time order, at most CHUNK_POINTS a piece. The pieces depend only on the
    points, so an overlapping export of the same hour makes the same keys. Small pieces keep
    a year's import in bounded memory: DuckDB holds an uncommitted transaction's rows in
    memory until they fill a row group, so a few thousand rows of a hundred kB each (a day
    a row) would not commit under the writer's memory limit, where many rows of a few kB do."""

    name: str
    units: str | None
    hours: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def add(self, date: object, text: str) -> None:
        d = date if isinstance(date, str) else ""
        texts = self.hours.get(d[:13])
        if texts is None:
            self.hours[d[:13]] = [(d, text)]
        else:
            texts.append((d, text))

    def records(self, fetched_at: datetime) -> Iterator[RawRecord]:
        head = '{"name":' + json.dumps(self.name, ensure_ascii=False) + ',"units":' + json.dumps(self.units) + ',"data":['
        for hour, points in self.hours.items():
            if any(points[i][0] > points[i + 1][0] for i in range(len(points) - 1)):
                points = sorted(points, key=lambda p: p[0])
            for i in range(0, len(points), CHUNK_POINTS):
                piece = points[i:i + CHUNK_POINTS]
                yield RawRecord(SOURCE, "metric", f"{self.name}|{piece[0][0] or hour}",
                                head + ",".join(t for _, t in piece) + "]}", fetched_at)


class _Reader:
    def __init__(self, text: str, ctx: Context):
        self.doc = JsonDoc(text, ctx.name)
        self.ctx = ctx
        self.series: list[Series] = []
        self.sleep: list[tuple[str, int, dict, float]] = []  # (path, text offset, point, minutes per unit)

    def fail(self, pos: str, detail: str) -> SourceFormatError:
        return SourceFormatError(self.ctx.name, detail, pos)

    def failing_at(self, at: int) -> Any:
        """A ``fail(path, detail)`` that adds the line and column of text offset ``at``, computed
        only when it fails (counting lines is a scan of the text)."""
        return lambda path, detail: SourceFormatError(self.ctx.name, detail, f"{path}, {self.doc.where(at)}")

    # -- the document -------------------------------------------------------------------
    def read(self) -> Iterator[Any]:
        doc = self.doc
        if doc.kind("") != "object":
            raise doc.error("", "expected a JSON object with a 'data' object (a Health Auto Export JSON export)")
        found = False
        for key in doc.keys(""):
            if key == "data":
                found = True
                if doc.kind("data") != "object":
                    raise doc.error("data", "'data' must be an object with 'metrics' and/or 'workouts'")
                for section in doc.keys("data"):
                    yield from self.section(section, f"data.{section}")
            elif key in ("metrics", "workouts"):  # the sections without their 'data' wrapper
                found = True
                yield from self.section(key, key)
        doc.end()
        if not found:
            raise doc.error("", "no 'data' object: not a Health Auto Export JSON export", 0)
        yield from emit(self.series, self.ctx.aggregation)
        yield from self.sleeps()

    def section(self, name: str, path: str) -> Iterator[Any]:
        doc = self.doc
        if doc.kind(path) != "array":
            doc.skip(path)
            return
        if name == "metrics":
            for i in doc.items(path):
                yield from self.metric(f"{path}[{i}]")
        elif name == "workouts":
            for i in doc.items(path):
                pos = f"{path}[{i}]"
                at = doc.pos
                obj, text = doc.value(pos)
                w = workout_from_json(obj, pos, self.failing_at(at))
                yield w
                yield RawRecord(SOURCE, "workout", w.workout_id, text, self.ctx.fetched_at)
        else:
            for i in doc.items(path):
                obj, text = doc.value(f"{path}[{i}]")
                key = obj.get("id") if isinstance(obj, dict) and isinstance(obj.get("id"), str) else raw_key(text)
                yield RawRecord(SOURCE, name, key, text, self.ctx.fetched_at)

    # -- one metric ---------------------------------------------------------------------
    def metric(self, path: str) -> Iterator[RawRecord]:
        doc = self.doc
        if doc.kind(path) != "object":
            raise doc.error(path, "a metric must be an object with 'name', 'units' and 'data'")
        name: str | None = None
        units: str | None = None
        pending: list[tuple[int, Any, str, int]] | None = None
        sink = None
        for key in doc.keys(path):
            if key in ("name", "units"):
                v, _ = doc.value(f"{path}.{key}")
                if not isinstance(v, str):
                    raise doc.error(path, f"{key!r} must be a string, not {v!r}")
                name, units = (v, units) if key == "name" else (name, v)
            elif key == "data":
                dpath = f"{path}.data"
                if doc.kind(dpath) != "array":
                    raise doc.error(dpath, "'data' must be an array of points")
                if name is not None and units is not None and sink is None:
                    sink = self.sink(name, units, path)
                if sink is not None:
                    for j, obj, text, at in doc.elements(dpath):
                        sink(j, obj, text, at)
                else:  # 'data' came before 'name'/'units'
                    pending = list(doc.elements(dpath))
        if name is None:
            raise doc.error(path, "a metric needs a 'name'")
        if sink is None:
            sink = self.sink(name, units, path)
            for j, obj, text, at in pending or ():
                sink(j, obj, text, at)
        yield from sink.chunks.records(self.ctx.fetched_at)  # type: ignore[attr-defined]

    def sink(self, name: str, units: str | None, path: str):
        """A function taking each point of the metric (index, decoded, text, offset)."""
        doc, chunks = self.doc, _Chunks(name, units)
        dpath = f"{path}.data"

        def pos(j: int, at: int) -> str:
            return f"{dpath}[{j}], {doc.where(at)}"

        if name == SLEEP:
            conv = conversion("hours", units or "hr")
            if conv is None:
                raise doc.error(path, f"{name}: unknown unit {units!r} (known: {known_units('hours')})")

            def add_sleep(j: int, obj: Any, text: str, at: int) -> None:
                if not isinstance(obj, dict):
                    raise self.fail(pos(j, at), "a sleep entry must be an object")
                chunks.add(obj.get("date", obj.get("startDate")), text)
                self.sleep.append((f"{dpath}[{j}]", at, obj, conv[0]))

            add_sleep.chunks = chunks  # type: ignore[attr-defined]
            return add_sleep

        spec = JSON_METRICS.get(name)
        if spec is None:  # not a metric Rhythm uses: raw only

            def add_raw(j: int, obj: Any, text: str, at: int) -> None:
                chunks.add(obj.get("date") if isinstance(obj, dict) else None, text)

            add_raw.chunks = chunks  # type: ignore[attr-defined]
            return add_raw

        if units is None:
            raise doc.error(path, f"{name}: no 'units'")
        conv = conversion(spec.kind, units)
        if conv is None:
            raise doc.error(path, f"{name}: unknown unit {units!r} (known: {known_units(spec.kind)})")
        series = Series(spec, conv[0], conv[1], percent_fix=spec.kind == "percent")
        self.series.append(series)
        heart = name == "heart_rate"
        cumulative = spec.cumulative
        add = series.add
        chunk = chunks.add

        def add_point(j: int, obj: Any, text: str, at: int) -> None:
            if type(obj) is not dict:
                raise self.fail(pos(j, at), "a point must be an object with 'date' and 'qty'")
            date = obj.get("date")
            try:
                epoch, off, day, sod = instant(date)
            except BadDate as exc:
                raise self.fail(pos(j, at), f"'date': {exc}") from None
            chunk(date, text)
            detail = None
            if heart:
                q = obj.get("Avg")
                if q is None:
                    q = obj.get("qty")
                elif "Min" in obj or "Max" in obj:
                    detail = hr_detail(obj.get("Min"), obj.get("Max"))
            else:
                q = obj.get("qty")
            if q is None:
                return  # nothing measured: never a 0
            tq = type(q)
            if tq is not float and tq is not int:
                raise self.fail(pos(j, at), f"{'Avg' if heart and 'Avg' in obj else 'qty'} is not a number: {q!r}")
            if tq is float and not math.isfinite(q):
                raise self.fail(pos(j, at), f"not a finite number: {q!r}")
            if cumulative and q < 0:
                raise self.fail(pos(j, at), f"negative amount: {q!r}")
            add(epoch, off, day, sod, q, devices(obj.get("source")), detail)

        add_point.chunks = chunks  # type: ignore[attr-defined]
        return add_point

    # -- sleep, once every point is seen --------------------------------------------------
    def sleeps(self) -> Iterator[Any]:
        segments = []
        for path, at, point, to_min in self.sleep:
            fail = self.failing_at(at)
            if sleep_mod.is_per_stage(point):
                seg, sample = sleep_mod.segment(point, to_min, path, fail)
                segments.append(seg)
                yield sample
            else:
                session = sleep_mod.aggregated(point, to_min, path, fail)
                if session is not None:
                    yield session
        if segments:
            yield from sleep_mod.sessions(segments)


def read_json(text: str, ctx: Context) -> Iterator[Any]:
    """Records of one Health Auto Export JSON document (see the module doc)."""
    yield from _Reader(text, ctx).read()
