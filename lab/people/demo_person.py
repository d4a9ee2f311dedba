"""The demo person of ``make demo`` as a person the plan benchmarks can plan: the bundled sample
files (Apple Health, WHOOP, calendar: ``rhythm/data/sample``), imported through ``rhythm
import``'s path, planned on 2025-03-10 .. 03-26 (the days issue 37 read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

FIRST, LAST = date(2025, 3, 10), date(2025, 3, 26)


@dataclass
class DemoPerson:
    name: str
    kind: str
    lang: str
    zone: str
    plan_days: list[date]
    files: list[tuple[str, Path]]  # (source, path) in import order
    records: list[Any] = field(default_factory=list)  # none: the files are imported instead
    shifts: dict[date, Any] = field(default_factory=dict)  # no night shifts
    sleeps: list[tuple[datetime, datetime]] | None = None  # the stored sleeps are the truth

    @property
    def last(self) -> date:
        return self.plan_days[-1]


def demo_person(first: date = FIRST, last: date = LAST) -> DemoPerson:
    from rhythm.data.make_sample import SAMPLE_TIMEZONE
    from rhythm.demo import SAMPLE_DIR, SAMPLE_FILES

    days = [first + timedelta(days=k) for k in range((last - first).days + 1)]
    return DemoPerson("demo", "demo", "en", SAMPLE_TIMEZONE, days,
                      [(source, SAMPLE_DIR / name) for source, name, _label in SAMPLE_FILES])


__all__ = ["DemoPerson", "demo_person"]
