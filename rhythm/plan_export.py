"""The plan in the calendar: the shell around the .ics writer and the Google push.

Loads, converts, writes (STYLE rule 17): which plan goes out is the latest one stored for
each day (``storage.plans.latest_plan``; a day with none is planned first by the planning function
the caller passes in, ``rhythm.jobs.recommend``: this module imports no unit of work); what an event says is ``calendar_blocks``; the writers are
``connectors.calendar.ics_write`` and ``connectors.calendar.google_write`` (the push itself is
the unit of work ``rhythm.jobs.push_google``).

``export_ics`` writes the file and nothing in the database (planning a missing day is its
own recorded unit of work).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from common.errors import ConfigError
from common.rhythm_blocks import CalendarBlock, block_key
from rhythm.settings import Settings, local_today, user_zone
from storage import open_db, plans
from storage.db import Database
from storage.plans import json_value

MAX_DAYS = 14
SUFFIX = " (Rhythm)"
#: How a missing day gets planned: ``rhythm.jobs.recommend`` (passed in, so this module
#: imports no unit of work).
PlanDay = Callable[[Settings, date, datetime | None], Any]
SLEEP_TITLES = {"bedtime": "Bedtime", "sleep_in": "Sleep in", "nap": "Nap", "early_night": "Early night",
                "day_sleep": "Sleep after your shift", "shift_nap": "Sleep before your shift"}


def plan_days(settings: Settings, day: date | None, days: int, now: datetime | None = None) -> list[date]:
    """``days`` local days from ``day`` (default: today in the person's zone)."""
    if not 1 <= int(days) <= MAX_DAYS:
        raise ConfigError(f"--days: expected 1 to {MAX_DAYS}, got {days}")
    first = day or local_today(settings, now)
    return [first + timedelta(days=i) for i in range(int(days))]


def read_plans(db: Database, days: Iterable[date]) -> dict[date, list[dict[str, Any]]]:
    """The latest stored plan of each day (its blocks; [] when none)."""
    return {d: plans.latest_plan(db, d) for d in days}


def unplanned(settings: Settings, days: Sequence[date]) -> list[date]:
    """The days with no stored plan."""
    if not settings.database.exists():
        return list(days)
    with open_db(settings.database, read_only=True) as db:
        stored = read_plans(db, days)
    return [d for d in days if not stored[d]]


def ensure_plans(settings: Settings, days: Sequence[date], plan: PlanDay, now: datetime | None = None) -> list[date]:
    """Plan each day that has no stored plan with ``plan`` (the caller's unit of work,
    ``rhythm.jobs.recommend``: one recorded run per day); returns the days planned now."""
    missing = unplanned(settings, days)
    for d in missing:
        plan(settings, d, now)
    return missing


# -- what an event says ---------------------------------------------------------------------------
def title(action: str, kind: str | None) -> str:
    """"Deep work (Rhythm)", "Bedtime (Rhythm)": the action (or the kind of sleep), marked."""
    from agent.day.plan import PHRASES

    if action == "SLEEP" or kind in SLEEP_TITLES:
        return SLEEP_TITLES.get(kind or "", "Sleep") + SUFFIX
    return PHRASES.get(action, action.replace("_", " ").capitalize()) + SUFFIX


def description(row: Mapping[str, Any]) -> str:
    """The rationale, the facts behind it, the expected effect, and how to answer."""
    parts = [str(row.get("rationale") or "").strip()]
    evidence = [str(e) for e in json_value(row.get("evidence"), []) if str(e).strip()]
    if evidence:
        parts.append("Why:\n" + "\n".join(f"- {e}" for e in evidence))
    effect = json_value(row.get("expected_effect"), {})
    if isinstance(effect, dict) and effect:
        ordered = sorted(effect.items(), key=lambda kv: (-abs(float(kv[1])), kv[0]))
        parts.append("Expected effect: " + ", ".join(f"{m} {float(v):+.2f}" for m, v in ordered))
    rid = row.get("id")
    parts.append(f"Suggested by Rhythm (recommendation #{rid}); answer with `rhythm feedback {rid} accept` "
                 "or `ignore`. Rhythm rewrites or removes this block when the plan changes.")
    return "\n\n".join(p for p in parts if p)


def calendar_blocks(rows: Sequence[Mapping[str, Any]], tz: tzinfo, busy: bool = False) -> list[CalendarBlock]:
    """One calendar block per stored recommendation that has times (a plan stored before
    recommendations had times has none to write)."""
    out = []
    for r in rows:
        if r.get("start_ts") is None or r.get("end_ts") is None:
            continue
        day = r["local_day"]
        out.append(CalendarBlock(
            key=block_key(day, r["slot"]), day=day, slot=r["slot"],
            start=r["start_ts"].astimezone(tz), end=r["end_ts"].astimezone(tz),
            summary=title(r["action"], r.get("kind")), description=description(r),
            planned_at=r["created_at"], busy=busy, action=r["action"], kind=r.get("kind"),
            recommendation_id=int(r["id"]),
        ))
    return out


def planned_at(stored: Mapping[date, Sequence[Mapping[str, Any]]]) -> dict[date, datetime]:
    """When each day's stored plan was made."""
    return {d: max(r["created_at"] for r in rows) for d, rows in stored.items() if rows}


# -- the .ics file ------------------------------------------------------------------------------------
def export_ics(
    settings: Settings,
    path: str | Path,
    day: date | None = None,
    days: int = 1,
    *,
    plan: PlanDay,
    busy: bool = False,
    now: datetime | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Write the latest plan of each day as an .ics file (planning a day first where none
    is stored, with ``plan``: ``rhythm.jobs.recommend``). The file is replaced whole
    (written next to it, then renamed), and only if Rhythm wrote it (``writable_target``)."""
    from connectors.calendar.ics_write import to_ics

    target = writable_target(path, force)
    wanted = plan_days(settings, day, days, now)
    planned_now = ensure_plans(settings, wanted, plan, now)
    tz = user_zone(settings)
    with open_db(settings.database, read_only=True) as db:
        stored = read_plans(db, wanted)
    blocks = [b for d in wanted for b in calendar_blocks(stored[d], tz, busy)]
    data = to_ics(blocks, tz)
    _write_atomic(target, data)
    record_exported(settings, wanted, blocks)
    return {
        "path": str(target),
        "days": [d.isoformat() for d in wanted],
        "planned": [d.isoformat() for d in planned_now],
        "busy": busy,
        "events": [
            {"uid": b.uid, "key": b.key, "start": b.start.isoformat(timespec="minutes"),
             "end": b.end.isoformat(timespec="minutes"), "summary": b.summary, "recommendation": b.recommendation_id}
            for b in sorted(blocks, key=lambda b: (b.start, b.key))
        ],
    }


def record_exported(settings: Settings, days: Sequence[date], blocks: Sequence[CalendarBlock]) -> None:
    """Remember which block went out under which UID, so that when the person's calendar comes
    back through `rhythm import ics`, what they did to Rhythm's events is read (issue 38: a
    deleted block is an ignore, a moved one a time preference). A replanned day's blocks that
    are no longer in the plan are forgotten: Rhythm removed them, not the person."""
    from common.records import SLOTS
    from storage.implicit import ICS_CALENDAR, record_pushed

    keys = {b.key for b in blocks}
    gone = [block_key(d, s) for d in days for s in SLOTS if block_key(d, s) not in keys]
    with open_db(settings.database) as db, db.transaction():
        record_pushed(db, ICS_CALENDAR, [{"key": b.key, "recommendation_id": b.recommendation_id, "event_id": b.uid,
                                          "start": b.start, "end": b.end} for b in blocks], gone, datetime.now(UTC))


#: How much of an existing file is read to find Rhythm's mark (PRODID is on its second line).
MARK_HEAD = 4096


def written_by_rhythm(path: Path) -> bool:
    """Whether the regular file at ``path`` is an .ics file Rhythm exported (its PRODID)."""
    from connectors.calendar.ics_write import PRODID

    with path.open("rb") as fh:
        head = fh.read(MARK_HEAD)
    lines = [ln.strip() for ln in head.decode("utf-8", "replace").splitlines()]
    return bool(lines) and lines[0] == "BEGIN:VCALENDAR" and f"PRODID:{PRODID}" in lines


def writable_target(path: str | Path, force: bool = False) -> Path:
    """``path`` if the export may write there: a new file, an empty one, or a file Rhythm
    itself wrote (any regular file with ``force``); never a folder, a symlink, a FIFO, a
    device or a socket (ConfigError, one line, before anything is planned or written)."""
    target = Path(path).expanduser()
    try:
        st = target.lstat()
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise ConfigError(f"{target.parent}: no such folder") from None
        return target
    except OSError as exc:
        raise ConfigError(f"{target}: cannot check it: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{target}: is a folder; give a file name such as {target / 'rhythm-plan.ics'}")
    if stat.S_ISLNK(st.st_mode):
        raise ConfigError(f"{target}: is a symbolic link; refused (Rhythm never writes through a link): "
                          "give the real file's path")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise ConfigError(f"{target}: is {kind}; refused, even with --force")
    if st.st_size == 0 or force:
        return target
    try:
        ours = written_by_rhythm(target)
    except OSError as exc:
        raise ConfigError(f"{target}: cannot read it: {exc.strerror or exc}") from None
    if not ours:
        raise ConfigError(f"{target}: exists and was not written by Rhythm; refused (choose a new file, or "
                          "--force to replace it)")
    return target


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
