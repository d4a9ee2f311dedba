"""Good and hostile inputs for the four importers, generated into a folder (nothing large is
committed: zip bombs are written streaming, big files are sparse or have lying headers).

Each builder takes the folder to write into and returns the path to import.
"""

from __future__ import annotations

import json
import os
import struct
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from tests.hostile import fitgen

TODAY = datetime.now(UTC).date()
HR = "HKQuantityTypeIdentifierHeartRate"
SLEEP = "HKCategoryTypeIdentifierSleepAnalysis"


# -- Apple Health ---------------------------------------------------------------------------
def hk_record(start: str, end: str | None = None, value: str = "62", type_: str = HR, source: str = "Watch") -> str:
    unit = ' unit="count/min"' if type_ == HR else ""
    val = f' value="{value}"' if value is not None else ""
    return (f'  <Record type="{type_}" sourceName="{source}"{unit} startDate="{start}" '
            f'endDate="{end or start}"{val}/>\n')


def hk_doc(body: str, prolog: str = '<?xml version="1.0" encoding="UTF-8"?>\n') -> str:
    return (prolog + '<HealthData locale="en_US">\n <ExportDate value="2026-01-01 10:00:00 +0100"/>\n'
            + body + "</HealthData>\n")


def hk_stamp(day: date, hh: int = 8, mm: int = 0, off: str = "+0100") -> str:
    return f"{day.isoformat()} {hh:02d}:{mm:02d}:00 {off}"


def good_healthkit(d: Path) -> Path:
    day = TODAY - timedelta(days=3)
    body = "".join(hk_record(hk_stamp(day, 8, m), value=str(60 + m)) for m in range(10))
    body += hk_record(hk_stamp(day - timedelta(days=1), 23, 0), hk_stamp(day, 6, 30), None, SLEEP, "Watch").replace(
        "/>", ' value="HKCategoryValueSleepAnalysisAsleepCore"/>')
    body += (f'  <Workout workoutActivityType="HKWorkoutActivityTypeRunning" duration="30" durationUnit="min" '
             f'sourceName="Watch" startDate="{hk_stamp(day, 18)}" endDate="{hk_stamp(day, 18, 30)}"/>\n')
    p = d / "export.xml"
    p.write_text(hk_doc(body))
    return p


def zipped(d: Path, name: str, member: str, data: bytes) -> Path:
    p = d / name
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, data)
    return p


def declare_size(zip_path: Path, member: str, size: int) -> None:
    """Rewrite the uncompressed size the central directory declares for `member` (a zip
    whose header claims GBs costs nothing to write; readers must refuse it unread). Sizes
    of 4 GiB and more go in a zip64 extra field, as real zip64 archives carry them."""
    data = bytearray(zip_path.read_bytes())
    name = member.encode()
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) != -1:
        n, m = struct.unpack_from("<HH", data, at + 28)
        if bytes(data[at + 46: at + 46 + n]) != name:
            at += 4
            continue
        if size < 0xFFFFFFFF:
            struct.pack_into("<I", data, at + 24, size)
        else:
            struct.pack_into("<I", data, at + 24, 0xFFFFFFFF)
            struct.pack_into("<H", data, at + 30, m + 12)
            data[at + 46 + n + m: at + 46 + n + m] = struct.pack("<HHQ", 0x0001, 8, size)
            eocd = data.rfind(b"PK\x05\x06")
            cd_size = struct.unpack_from("<I", data, eocd + 12)[0]
            struct.pack_into("<I", data, eocd + 12, cd_size + 12)
        zip_path.write_bytes(bytes(data))
        return
    raise AssertionError(f"{member} not in {zip_path}")


def zeros_member(p: Path, member: str, size: int) -> Path:
    """A real zip bomb: `size` bytes of zeros deflated (~1000:1), written in chunks."""
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf, zf.open(member, "w", force_zip64=True) as fh:
        for _ in range(size // len(chunk)):
            fh.write(chunk)
    return p


def billion_laughs() -> str:
    """Nine levels of ten entity references each: 10^9 "lol"s from a 1 KB prolog."""
    ents = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    prolog = '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE HealthData [\n' + "\n".join(ents) + "\n]>\n"
    return hk_doc(hk_record(hk_stamp(TODAY), value="&lol9;"), prolog)


# -- Garmin ------------------------------------------------------------------------------------
def good_fit(d: Path, name: str = "run.fit", start: datetime | None = None, n: int = 60) -> Path:
    t0 = fitgen.fit_seconds(start or datetime.combine(TODAY - timedelta(days=2), datetime.min.time(), UTC) + timedelta(hours=7))
    msgs = [fitgen.file_id(created=t0), *(fitgen.record(t0 + i, 100 + i % 30) for i in range(n)), fitgen.session(t0, t0 + n)]
    p = d / name
    p.write_bytes(fitgen.fit_file(msgs))
    return p


def sleep_row(day: date, **extra: object) -> dict:
    start = datetime.combine(day - timedelta(days=1), datetime.min.time()) + timedelta(hours=22)
    row = {"calendarDate": day.isoformat(), "sleepStartTimestampGMT": start.isoformat() + ".0",
           "sleepEndTimestampGMT": (start + timedelta(hours=8)).isoformat() + ".0",
           "deepSleepSeconds": 5400, "lightSleepSeconds": 14400, "remSleepSeconds": 5400, "awakeSleepSeconds": 1200}
    row.update(extra)
    return row


def garmin_json(d: Path, name: str, doc: object, *, raw: str | None = None) -> Path:
    p = d / name
    p.write_text(raw if raw is not None else json.dumps(doc))
    return p


def good_garmin(d: Path) -> Path:
    folder = d / "garmin_export"
    wellness = folder / "DI_CONNECT" / "DI-Connect-Wellness"
    wellness.mkdir(parents=True)
    garmin_json(wellness, "2026_sleepData.json", [sleep_row(TODAY - timedelta(days=i)) for i in range(1, 4)])
    good_fit(folder)
    return folder


# -- WHOOP -----------------------------------------------------------------------------------
CYCLE_HEADER = ["Cycle start time", "Cycle end time", "Cycle timezone", "Recovery score %",
                "Resting heart rate (bpm)", "Heart rate variability (ms)", "Day Strain", "Wake onset"]
SLEEP_HEADER = ["Cycle start time", "Cycle timezone", "Sleep onset", "Wake onset", "Nap",
                "Asleep duration (min)", "In bed duration (min)"]


def csv_text(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(",".join(r) for r in [header, *rows]) + "\n"


def cycle_row(day: date, recovery: str = "65", tz: str = "UTC-04:00") -> list[str]:
    start = f"{(day - timedelta(days=1)).isoformat()} 22:30:00"
    end = f"{day.isoformat()} 22:40:00"
    return [start, end, tz, recovery, "55", "48", "11.2", f"{day.isoformat()} 06:30:00"]


def good_whoop(d: Path) -> Path:
    folder = d / "my_whoop_data"
    folder.mkdir()
    days = [TODAY - timedelta(days=i) for i in range(2, 6)]
    (folder / "physiological_cycles.csv").write_text(csv_text(CYCLE_HEADER, [cycle_row(x) for x in days]))
    sleeps = [[f"{(x - timedelta(days=1)).isoformat()} 22:30:00", "UTC-04:00", f"{(x - timedelta(days=1)).isoformat()} 22:45:00",
               f"{x.isoformat()} 06:30:00", "false", "420", "465"] for x in days]
    (folder / "sleeps.csv").write_text(csv_text(SLEEP_HEADER, sleeps))
    return folder


# -- calendar ------------------------------------------------------------------------------------
def ics_event(uid: str, start: str, end: str, *extra: str, summary: str = "x") -> str:
    lines = ["BEGIN:VEVENT", f"UID:{uid}", "DTSTAMP:20260101T000000Z", start, end, f"SUMMARY:{summary}", *extra, "END:VEVENT"]
    return "\r\n".join(lines) + "\r\n"


def ics_doc(*events: str, tz: str = "") -> str:
    return "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//rhythm tests//EN\r\n" + tz + "".join(events) + "END:VCALENDAR\r\n"


def ics_stamp(day: date, hh: int = 9) -> str:
    return f"{day.strftime('%Y%m%d')}T{hh:02d}0000Z"


def good_ics(d: Path) -> Path:
    p = d / "calendar.ics"
    first = TODAY - timedelta(days=20)
    p.write_text(ics_doc(
        ics_event("one-off-1", f"DTSTART:{ics_stamp(TODAY - timedelta(days=5))}", f"DTEND:{ics_stamp(TODAY - timedelta(days=5), 10)}"),
        ics_event("weekly-1", f"DTSTART:{ics_stamp(first, 14)}", f"DTEND:{ics_stamp(first, 15)}", "RRULE:FREQ=WEEKLY;COUNT=4"),
    ))
    return p


def make_fifo(p: Path) -> Path:
    os.mkfifo(p)
    return p
