"""The demo: the whole product on the bundled sample data, in a throw-away RHYTHM_HOME.

Stages, each through the same library function as its CLI command (no second code path):

1. import the sample's Apple Health export, WHOOP export and calendar
   (``rhythm.jobs.import_file``, as ``rhythm import``);
2. map: meters and slot actions (``rhythm.jobs.map_data``, as ``rhythm map``);
   (the home's config.toml gets the sample person's zone, so the demo home keeps planning in
   it: ``RHYTHM_HOME=<demo home> rhythm recommend``);
3. recommend: the plan for the sample's last day (``rhythm.jobs.recommend``, as
   ``rhythm recommend``);
4. report: the HTML report (``rhythm.report.write_report``, as ``rhythm report``).

"Today" is the sample's last day, passed explicitly, so the output does not depend on the
calendar.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

from rhythm import jobs
from rhythm.data.make_sample import SAMPLE_START, SAMPLE_TIMEZONE, SAMPLE_TODAY
from rhythm.report import Report, write_report
from rhythm.settings import Settings, init_home, set_config
from storage import open_db

SAMPLE_DIR = Path(__file__).resolve().parent / "data" / "sample"
# (source, file, label) in import order
SAMPLE_FILES = (
    ("healthkit", "apple_health_export.zip", "Apple Health"),
    ("whoop", "whoop_export.zip", "WHOOP"),
    ("ics", "calendar.ics", "Calendar"),
)
REPORT_DAYS = (SAMPLE_TODAY - SAMPLE_START).days + 1


@dataclass
class DemoResult:
    home: Path
    today: date
    imports: list[dict[str, Any]] = field(default_factory=list)
    mapped: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None  # Plan.summary()
    plan_obj: Any = None  # the Plan itself (rhythm.recommend.Plan)
    notes: list[str] = field(default_factory=list)
    report: Report | None = None
    tables: dict[str, int] = field(default_factory=dict)


def demo_settings(settings: Settings, home: Path) -> Settings:
    """The user's settings, pointed at the demo home and the sample person's zone."""
    return replace(settings, home=home, db_path=None, timezone=SAMPLE_TIMEZONE)


def prepare_demo_home(settings: Settings, home: Path) -> Settings:
    """Create the demo home with the sample person's zone written into its config.toml, so
    the demo home keeps planning in that zone afterwards (``rhythm recommend`` there)."""
    s = demo_settings(settings, home)
    init_home(s)
    set_config(s, "timezone", SAMPLE_TIMEZONE)
    return s


def run_demo(
    settings: Settings,
    home: Path,
    say: Callable[[str], None] = lambda _m: None,
    *,
    today: date = SAMPLE_TODAY,
    sample_dir: Path = SAMPLE_DIR,
) -> DemoResult:
    s = prepare_demo_home(settings, home)
    result = DemoResult(home=home, today=today)

    for source, name, label in SAMPLE_FILES:
        summary = jobs.import_file(s, source, sample_dir / name).to_dict()
        result.imports.append({"source": source, "label": label, "file": name, **summary})
        say(f"imported {label}: {summary['records']} records, days {summary['first_day']} .. {summary['last_day']}")

    result.mapped = jobs.map_data(s)
    say("mapped: meters and slot actions rebuilt")

    plan = jobs.recommend(s, today)
    result.plan_obj = plan
    result.plan = plan.summary()
    result.notes.extend(plan.notes)
    say(f"recommended: {len(result.plan['slots'])} slots for {today}")

    result.report = write_report(s, days=REPORT_DAYS, today=today, out=home / "report.html")
    with open_db(s.database, read_only=True) as db:
        result.tables = db.row_counts()
    return result

