"""Generated task exports in the shapes people have (nothing copied: seeded Python).

``make_tasks(seed, ...)`` draws a person's tasks (done, open, cancelled; some ticked off in
the same minute; titles with commas, quotes, line breaks and non-Latin text); each writer
returns the bytes of one app's export of them:

- ``ticktick``: TickTick's backup CSV: a few lines about the file, then 24 quoted columns;
  ``Status`` 0 open, 1 or 2 done, -1 won't do; ``Completed Time`` in UTC (``+0000``) with the
  task's ``Timezone``;
- ``things``: a Things 3 export (uuid, title, status incomplete/completed/canceled,
  ``stop_date`` in local time without an offset);
- ``omnifocus``: OmniFocus's CSV (``Completion Date`` with a numeric offset, ``Status``);
- ``generic``: ``title,completed_at,due,list`` with ISO 8601 local times and offsets;
- ``excel``: a spreadsheet saved as CSV with a BOM, ``;`` separators, ``2024/03/01 14:05``
  times and a ``Done`` column of ``x``;
- ``epoch``: ``name,completed,id`` with epoch seconds;
- ``dates``: ``Task,Date completed`` with the day only.
"""

from __future__ import annotations

import csv
import io
import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

TITLES = ('Call "Mum", then the bank', "Zahnarzt\nTermin verschieben", "レポートを書く", "Email Bob",
          "Fix the bike; oil chain", "Write report", "Pay rent", "Review PR #42", "Groceries", "Plan trip")
LISTS = ("Inbox", "Work", "Home", "Errands")


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    list: str
    done: datetime | None  # aware, local to where it was ticked off; None: open
    cancelled: bool = False

    @property
    def counts(self) -> bool:
        return self.done is not None and not self.cancelled


def make_tasks(seed: int, zone: str, start: date = date(2024, 3, 1), days: int = 45, n: int = 120,
               travel: tuple[str, ...] = ()) -> list[Task]:
    """Tasks ticked off between 07:00 and 22:59 local time (whole minutes), in ``zone`` or, a
    third of them, in one of the ``travel`` zones."""
    rng = random.Random(seed)
    out: list[Task] = []
    for i in range(n):
        kind = rng.random()
        tz = ZoneInfo(rng.choice(travel) if travel and rng.random() < 0.33 else zone)
        d = start + timedelta(days=rng.randrange(days))
        done = datetime(d.year, d.month, d.day, rng.randrange(7, 23), rng.randrange(60), tzinfo=tz)
        title = f"{rng.choice(TITLES)} {i}"  # two tasks are never the same row (see test_tasks_csv)
        if out and rng.random() < 0.1 and out[-1].done is not None:  # ticked off in the same minute
            done = out[-1].done
        tid = f"{seed:02d}{i:04d}" + "".join(rng.choice("abcdef0123456789") for _ in range(8))
        if kind < 0.2:
            out.append(Task(tid, title, rng.choice(LISTS), None))
        else:
            out.append(Task(tid, title, rng.choice(LISTS), done, cancelled=kind > 0.9))
    return out


def expected(tasks: list[Task]) -> Counter:
    """(UTC instant, local day, offset minutes) -> completions that count."""
    c: Counter = Counter()
    for t in tasks:
        if t.counts:
            c[(t.done.astimezone(UTC), t.done.date(), int(t.done.utcoffset().total_seconds() // 60))] += 1
    return c


def expected_days(tasks: list[Task]) -> Counter:
    return Counter(t.done.date() for t in tasks if t.counts)


def _csv(header: list[str], rows: list[list[str]], *, delimiter: str = ",", quote_all: bool = False,
         preamble: str = "", bom: bool = False) -> bytes:
    buf = io.StringIO(newline="")
    buf.write(preamble)
    w = csv.writer(buf, delimiter=delimiter, quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL,
                   lineterminator="\r\n" if bom else "\n")
    w.writerow(header)
    w.writerows(rows)
    return (b"\xef\xbb\xbf" if bom else b"") + buf.getvalue().encode("utf-8")


TICKTICK_HEADER = ["Folder Name", "List Name", "Title", "Kind", "Tags", "Content", "Is Check list",
                   "Start Date", "Due Date", "Reminder", "Repeat", "Priority", "Status", "Created Time",
                   "Completed Time", "Order", "Timezone", "Is All Day", "Is Floating", "Column Name",
                   "Column Order", "View Mode", "taskId", "parentId"]


def ticktick(tasks: list[Task]) -> bytes:
    preamble = '"Date: 2024-04-20+0000"\n"Version: 7.1"\n"Status: \n0 Normal\n1 Completed\n2 Archived"\n'
    rows = []
    for i, t in enumerate(tasks):
        status = "0" if t.done is None else ("-1" if t.cancelled else ("2" if i % 3 == 0 else "1"))
        done = "" if t.done is None else t.done.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")
        zone = getattr((t.done or datetime.now(UTC)).tzinfo, "key", "UTC")
        rows.append(["", t.list, t.title, "TEXT", "", "", "N", "", "", "", "", "0", status,
                     "2024-02-01T09:00:00+0000", done, str(i), zone, "false", "false", "", "", "list", t.id, ""])
    return _csv(TICKTICK_HEADER, rows, quote_all=True, preamble=preamble)


def things(tasks: list[Task]) -> bytes:
    rows = []
    for t in tasks:
        status = "incomplete" if t.done is None else ("canceled" if t.cancelled else "completed")
        stop = "" if t.done is None else t.done.strftime("%Y-%m-%d %H:%M:%S")
        rows.append([t.id, t.title, status, stop, "", t.list])
    return _csv(["uuid", "title", "status", "stop_date", "area", "project"], rows)


def omnifocus(tasks: list[Task]) -> bytes:
    rows = []
    for t in tasks:
        status = "Active" if t.done is None else ("Dropped" if t.cancelled else "Completed")
        done = "" if t.done is None else t.done.strftime("%Y-%m-%d %H:%M:%S %z")
        rows.append([t.id, "Action", t.title, status, t.list, "", "", "", done, "", "0", "", ""])
    return _csv(["Task ID", "Type", "Name", "Status", "Project", "Context", "Start Date", "Due Date",
                 "Completion Date", "Duration", "Flagged", "Notes", "Tags"], rows)


def generic(tasks: list[Task]) -> bytes:
    rows = [[t.title, "" if t.done is None else t.done.isoformat(), "2024-05-01", t.list]
            for t in tasks if not t.cancelled]
    return _csv(["title", "completed_at", "due", "list"], rows)


def excel(tasks: list[Task]) -> bytes:
    rows = [[t.title, "" if t.done is None else "x", "" if t.done is None else t.done.strftime("%Y/%m/%d %H:%M"),
             getattr((t.done or datetime.now(UTC)).tzinfo, "key", "")] for t in tasks if not t.cancelled]
    return _csv(["Title", "Done", "Completed on", "Time zone"], rows, delimiter=";", bom=True)


def epoch(tasks: list[Task]) -> bytes:
    rows = [[t.title, "" if t.done is None else str(int(t.done.timestamp())), t.id]
            for t in tasks if not t.cancelled]
    return _csv(["name", "completed", "id"], rows)


def dates(tasks: list[Task]) -> bytes:
    rows = [[t.title, "" if t.done is None else t.done.date().isoformat()] for t in tasks if not t.cancelled]
    return _csv(["Task", "Date completed"], rows)


# format -> (writer, whether it carries each task's own zone)
WRITERS = {
    "ticktick": (ticktick, True),
    "things": (things, False),
    "omnifocus": (omnifocus, False),
    "generic": (generic, False),
    "excel": (excel, True),
    "epoch": (epoch, False),
}
