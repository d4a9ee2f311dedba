"""One metric's points from one payload, kept as compact columns, then emitted as samples.

How a bucket is counted once (README "Natural keys"):

- The app aggregates Apple Health per bucket (seconds, minutes, hours or days: the setting
  "Aggregation"), with Apple Health's own statistics, which already count a minute walked
  with the Watch on the wrist and the iPhone in the pocket once. Each point is the bucket's
  amount, its ``date`` the bucket's start, its ``source`` the devices that contributed
  (``Apple Watch|iPhone``).
- An amount (steps, energy, distance, exercise and stand time, floors, mindful minutes)
  becomes one ``samples`` row keyed by (``hae``, metric, ``source_name``, ``start_ts``,
  ``end_ts``): ``end_ts`` is the start plus the bucket length, and ``source_name`` names the
  *series* (``hae_minutes``, ``hae_hours``, ``hae_days``, ``hae_seconds``), never the devices.
  The devices go to ``device``, normalised (split on ``|``, trimmed, de-duplicated, sorted),
  which is not part of the key. So the same minute or hour exported again, by an overlapping
  daily file, a re-import or a later push, with its devices in another order or with one
  more device once the Watch synced, lands on the same row (updated in place, the later
  import winning), never on a second one.
- Rows of one series never overlap; rows of two series may (a day exported once by minute
  and once by hour): like two devices of other sources, they are never added together
  (the daily views and mapping take the largest per-series total).
- A level (heart rate, HRV, resting heart rate, SpO2, weight, ...) is an instant at its
  point's date: ``end_ts = start_ts``, ``source_name`` ``hae``, so a re-exported point is
  the same row whatever the export's aggregation.

The bucket length is the ``automation-aggregation`` header of a REST push when it names
one; otherwise it is read from the timestamps of the amounts: the amounts of one export
share the app's aggregation, so they take the finest alignment found among them (all on
whole days: daily; whole hours: hourly; whole minutes: by minute; else by second, an
instant). A sparse series alone (mindful minutes) would look coarser than it is.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from common.records import METRIC_UNITS, RecordBatch, Sample
from connectors.hae.metrics import MetricSpec

SOURCE = "hae"
GRANULARITIES = ("seconds", "minutes", "hours", "days")  # finest first
BUCKET_S = {"seconds": 0, "minutes": 60, "hours": 3600, "days": 86400}
_TS = pa.timestamp("us", tz="UTC")


LEVELS = "hae"  # source_name of instants (levels, not amounts)


def series_name(granularity: str) -> str:
    return f"hae_{granularity}"


def alignment(second_of_day: array) -> str:
    """The coarsest bucket every local wall time of a series falls on."""
    if not second_of_day:
        return "days"
    sod = np.frombuffer(second_of_day, dtype=np.int32)
    if (sod % 60).any():
        return "seconds"
    if (sod % 3600).any():
        return "minutes"
    if sod.any():
        return "hours"
    return "days"


def finest(*names: str | None) -> str:
    known = [n for n in names if n in BUCKET_S]
    return min(known, key=GRANULARITIES.index) if known else "days"


_DEVICES: dict[str, str] = {}


def devices(value: object) -> str | None:
    """``"Rob's Apple Watch|iPhone|Rob's Apple Watch"`` -> ``"Rob's Apple Watch|iPhone"``."""
    if not isinstance(value, str) or not value.strip():
        return None
    d = _DEVICES.get(value)
    if d is None:
        parts = sorted({p.strip() for p in value.split("|") if p.strip()})
        d = "|".join(parts) or None
        if len(_DEVICES) < 10_000:
            _DEVICES[value] = d  # type: ignore[assignment]
    return d


@dataclass
class Series:
    """The points of one metric (one ``data.metrics[i]`` object, or one CSV column)."""

    spec: MetricSpec
    scale: float
    offset: float
    percent_fix: bool = False  # SpO2 written as a fraction (0.97) in some versions
    epoch: array = field(default_factory=lambda: array("q"))
    offset_min: array = field(default_factory=lambda: array("i"))
    day: array = field(default_factory=lambda: array("i"))
    second_of_day: array = field(default_factory=lambda: array("i"))
    value: array = field(default_factory=lambda: array("d"))
    device: list[str | None] = field(default_factory=list)
    detail: list[str | None] | None = None  # heart rate: {"min": .., "max": ..}

    def add(self, epoch: int, offset_min: int, day: int, sod: int, value: float, device: str | None,
            detail: str | None = None) -> None:
        self.epoch.append(epoch)
        self.offset_min.append(offset_min)
        self.day.append(day)
        self.second_of_day.append(sod)
        self.value.append(value)
        self.device.append(device)
        if detail is not None and self.detail is None:
            self.detail = [None] * (len(self.value) - 1)
        if self.detail is not None:
            self.detail.append(detail)

    def __len__(self) -> int:
        return len(self.value)

    def batch(self, granularity: str, label: str) -> RecordBatch:
        n = len(self.value)
        start = np.frombuffer(self.epoch, dtype=np.int64) * 1_000_000
        end = start + BUCKET_S[granularity] * 1_000_000
        values = np.frombuffer(self.value, dtype=np.float64) * self.scale + self.offset
        if self.percent_fix:
            values = np.where(values <= 1.0, values * 100.0, values)
        metric = self.spec.metric
        cols = {
            "source": pa.array([SOURCE] * n, pa.string()),
            "metric": pa.array([metric] * n, pa.string()),
            "start_ts": pa.array(start, _TS),
            "end_ts": pa.array(end, _TS),
            "value": pa.array(values, pa.float64()),
            "unit": pa.array([METRIC_UNITS[metric]] * n, pa.string()),
            "local_day": pa.array(np.frombuffer(self.day, dtype=np.int32), pa.date32()),
            "source_name": pa.array([label] * n, pa.string()),
            "device": pa.array(self.device, pa.string()),
            "tz_offset_min": pa.array(np.frombuffer(self.offset_min, dtype=np.int32), pa.int32()),
            "detail": pa.array(self.detail if self.detail is not None else [None] * n, pa.string()),
        }
        return RecordBatch(Sample, cols)


def hr_detail(lo: object, hi: object) -> str | None:
    """The bucket's minimum and maximum beside its average (heart rate's Min/Avg/Max)."""
    parts = {}
    if isinstance(lo, int | float) and not isinstance(lo, bool):
        parts["min"] = lo
    if isinstance(hi, int | float) and not isinstance(hi, bool):
        parts["max"] = hi
    return json.dumps(parts, separators=(",", ":")) if parts else None


def emit(series: list[Series], hint: str | None) -> Iterator[RecordBatch]:
    """Sample batches of a payload's series (see the module doc)."""
    hint = hint if hint in BUCKET_S else None
    amounts = [s for s in series if s.spec.cumulative and len(s)]
    seen = finest(*(alignment(s.second_of_day) for s in amounts)) if amounts else "days"
    granularity = finest(hint, seen) if hint else seen  # data finer than the header: the data
    for s in series:
        if not len(s):
            continue
        if s.spec.cumulative:
            yield s.batch(granularity, series_name(granularity))
        else:
            yield s.batch("seconds", LEVELS)
