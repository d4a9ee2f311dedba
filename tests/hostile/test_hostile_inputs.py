"""Hostile and malformed inputs for the four importers, through the real CLI (issue 22).

Each case is refused with exactly one `error:` line, a non-zero exit and the database
exactly as before; or, where the input is legitimately handled, exits 0 with nothing on
stderr and only the rows it should add. In both, no file appears outside RHYTHM_HOME and
the input's folder is left as it was (tests/hostile/conftest.py). Apple Health cases run on
both parser paths (the native scanner, when built, and the pure-Python one).
"""

from __future__ import annotations

import json
import os
import random
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from connectors.healthkit import native
from tests.hostile import fitgen
from tests.hostile import inputs as gen
from tests.hostile.conftest import Sealed, snapshot, tree

RANGE = r"outside the accepted range 1900-01-01 \.\. 2100-12-31"
Check = Callable[[dict, dict, dict], None]  # (summary, db before, db after)


@dataclass(frozen=True)
class Case:
    id: str
    source: str  # healthkit, garmin, whoop, ics
    build: Callable[[Path], Path]
    error: str | None  # regex the one error line matches; None: handled, exit 0
    check: Check | None = None  # for handled input: what the import did

    def __str__(self) -> str:
        return self.id


def write(name: str, text: str | bytes) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        p = d / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        return p

    return build


def garbage(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def only_skips(expected: dict[str, int], grew: dict[str, int] | None = None) -> Check:
    """Handled input: these rows left out, and no table but `grew` (and `runs`) changed by
    more than the given number of rows."""
    grew = grew or {}

    def check(summary: dict, before: dict, after: dict) -> None:
        assert summary["skipped"] == expected
        for table, (n, digest) in after.items():
            if table == "runs":
                continue
            if table in grew:
                assert n - before[table][0] == grew[table], table
            else:
                assert (n, digest) == before.get(table, (0, after[table][1])), f"{table} changed"

    return check


# -- Apple Health ---------------------------------------------------------------------------------
def hk(body: str, prolog: str | None = None) -> Callable[[Path], Path]:
    return write("export.xml", gen.hk_doc(body) if prolog is None else gen.hk_doc(body, prolog))


def hk_zip_declaring(size: int) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        member = "apple_health_export/export.xml"
        p = gen.zipped(d, "export.zip", member, gen.hk_doc(gen.hk_record(gen.hk_stamp(gen.TODAY))).encode())
        gen.declare_size(p, member, size)
        return p

    return build


def hk_truncated_zip(d: Path) -> Path:
    body = "".join(gen.hk_record(gen.hk_stamp(gen.TODAY, 8, m % 60), value=str(m)) for m in range(2000))
    p = gen.zipped(d, "export.zip", "apple_health_export/export.xml", gen.hk_doc(body).encode())
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    return p


def hk_symlink_out(d: Path) -> Path:
    outside = d / "elsewhere"
    outside.mkdir()
    gen.good_healthkit(outside)
    folder = d / "apple_health_export"
    folder.mkdir()
    (folder / "export.xml").symlink_to(outside / "export.xml")
    return folder


def hk_fifo(d: Path) -> Path:
    return gen.make_fifo(d / "export.xml")


def hk_deep(d: Path) -> Path:
    return hk("<a>" * 100_000 + "</a>" * 100_000 + "\n")(d)


def hk_impossible_values(d: Path) -> Path:
    day = gen.TODAY - timedelta(days=1)
    body = (gen.hk_record(gen.hk_stamp(day, 9, 0), value="NaN") + gen.hk_record(gen.hk_stamp(day, 9, 1), value="inf")
            + gen.hk_record(gen.hk_stamp(day, 9, 2), value="-1e999")
            + gen.hk_record(gen.hk_stamp(day, 9, 5), gen.hk_stamp(day, 9, 4), value="70")
            + gen.hk_record(gen.hk_stamp(day, 2), gen.hk_stamp(day, 1), None, gen.SLEEP).replace("/>", ' value="HKCategoryValueSleepAnalysisAsleepREM"/>')
            + gen.hk_record(gen.hk_stamp(day, 9, 9), value="71"))
    return hk(body)(d)


HEALTHKIT = [
    Case("hk-record-year-0001", "healthkit", hk(gen.hk_record("0001-01-01 00:00:00 +1400")), rf"quantity Record 1.*startDate '0001-01-01 00:00:00 \+1400' is {RANGE}"),
    Case("hk-record-year-9999", "healthkit", hk(gen.hk_record("9999-12-31 23:00:00 -1400")), rf"startDate '9999-12-31 23:00:00 -1400' is {RANGE}"),
    Case("hk-end-in-year-9999", "healthkit", hk(gen.hk_record(gen.hk_stamp(gen.TODAY), "9999-12-31 23:00:00 -1400")), rf"endDate .* is {RANGE}"),
    Case("hk-impossible-utc-offset", "healthkit", hk(gen.hk_record("2024-01-01 00:00:00 +9999")), r"quantity Record 1: .*startDate '2024-01-01 00:00:00 \+9999' has an impossible UTC offset"),
    Case("hk-category-year-1850", "healthkit",
         hk(gen.hk_record(gen.hk_stamp(gen.TODAY), value="HKCategoryValueSleepAnalysisInBed", type_=gen.SLEEP) + gen.hk_record("1850-01-01 01:00:00 +0000", value="HKCategoryValueSleepAnalysisInBed", type_=gen.SLEEP)),
         rf"line 5, column \d+\): startDate '1850-01-01 01:00:00 \+0000' is {RANGE}"),
    Case("hk-workout-year-2150", "healthkit",
         hk('  <Workout workoutActivityType="HKWorkoutActivityTypeRunning" sourceName="W" startDate="2150-01-01 08:00:00 +0000" endDate="2150-01-01 09:00:00 +0000"/>\n'),
         rf"line \d+, column \d+\): Workout: startDate .* is {RANGE}"),
    Case("hk-activity-summary-year-0001", "healthkit", hk('  <ActivitySummary dateComponents="0001-01-01" activeEnergyBurned="10"/>\n'), rf"ActivitySummary: dateComponents '0001-01-01' is {RANGE}"),
    Case("hk-unknown-encoding", "healthkit", hk(gen.hk_record(gen.hk_stamp(gen.TODAY)), '<?xml version="1.0" encoding="x-no-such-encoding"?>\n'), r"line 1, column \d+\): unknown encoding: x-no-such-encoding"),
    Case("hk-billion-laughs", "healthkit", write("export.xml", gen.billion_laughs()), r"malformed XML: .*(amplification|entit)"),
    Case("hk-external-entity-in-attribute", "healthkit",
         hk(gen.hk_record(gen.hk_stamp(gen.TODAY), value="&xxe;"), '<?xml version="1.0"?>\n<!DOCTYPE HealthData [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'),
         r"malformed XML: reference to external entity in attribute"),
    Case("hk-mismatched-tag", "healthkit", hk(gen.hk_record(gen.hk_stamp(gen.TODAY)) + "<Foo></Bar>\n"), r"line 5, column \d+\): malformed XML: mismatched tag"),
    Case("hk-missing-required-attribute", "healthkit", hk('  <Record type="HKQuantityTypeIdentifierHeartRate" startDate="2024-01-01 00:00:00 +0000" endDate="2024-01-01 00:00:00 +0000" value="1"/>\n'), r"lacks required attribute 'sourceName'"),
    Case("hk-truncated-zip", "healthkit", hk_truncated_zip, r"damaged or truncated zip"),
    Case("hk-zip-bomb-declared-9-gib", "healthkit", hk_zip_declaring(9 << 30), r"the export XML \(.* bytes uncompressed\) is larger than 8 GiB; refused"),
    Case("hk-empty-file", "healthkit", write("export.xml", b""), r"export.xml"),
    Case("hk-binary-garbage", "healthkit", write("export.xml", garbage(4096, 1)), r"malformed XML"),
    Case("hk-latin1-bytes-in-utf8", "healthkit", write("export.xml", gen.hk_doc(gen.hk_record(gen.hk_stamp(gen.TODAY), source="Montr\xe9al")).encode("latin-1")), r"line 4, column \d+\): malformed XML: not well-formed"),
    Case("hk-fifo-instead-of-file", "healthkit", hk_fifo, r"not a regular file or folder"),
    Case("hk-symlink-leading-out-of-the-folder", "healthkit", hk_symlink_out, r"no Apple Health export XML"),
    Case("hk-100k-nested-elements", "healthkit", hk_deep, None, only_skips({})),
    Case("hk-nan-inf-and-backwards-rows", "healthkit", hk_impossible_values, None,
         only_skips({"NaN or infinite value": 3, "end before start": 2}, grew={"samples": 1})),
]


# -- Garmin ----------------------------------------------------------------------------------------
def gj(name: str, doc: object = None, raw: str | None = None) -> Callable[[Path], Path]:
    return lambda d: gen.garmin_json(d, name, doc, raw=raw)


def fit_with(messages: Callable[[int], list], name: str = "x.fit", truncate: int | None = None) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        t0 = fitgen.fit_seconds(datetime(2026, 3, 1, 8, tzinfo=UTC))
        p = d / name
        p.write_bytes(fitgen.fit_file(messages(t0), truncate=truncate))
        return p

    return build


def fit_flipped(d: Path) -> Path:
    p = gen.good_fit(d)
    data = bytearray(p.read_bytes())
    data[40] ^= 0xFF
    p.write_bytes(bytes(data))
    return p


def garmin_zip_declaring(size: int) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        fit = gen.good_fit(d).read_bytes()
        (d / "run.fit").unlink()
        p = gen.zipped(d, "export.zip", "DI_CONNECT/DI-Connect-Uploaded-Files/big.fit", fit)
        gen.declare_size(p, "DI_CONNECT/DI-Connect-Uploaded-Files/big.fit", size)
        return p

    return build


def garmin_nested(depth: int) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        data = gen.good_fit(d).read_bytes()
        (d / "run.fit").unlink()
        name = "run.fit"
        for level in range(depth):
            p = gen.zipped(d, f"level{level}.zip", name, data)
            data, name = p.read_bytes(), p.name
            p.unlink()
        out = d / "export.zip"
        out.write_bytes(data)
        return out

    return build


def garmin_truncated_zip(d: Path) -> Path:
    folder = gen.good_garmin(d)
    p = d / "export.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                zf.write(f, str(f.relative_to(folder)))
    p.write_bytes(p.read_bytes()[:-30])
    for f in sorted(folder.rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    folder.rmdir()
    return p


def garmin_links_out(d: Path) -> Path:
    folder = d / "garmin"
    folder.mkdir()
    (folder / "zero.fit").symlink_to("/dev/zero")
    outside = d / "outside"
    outside.mkdir()
    gen.good_fit(outside)
    (folder / "run.fit").symlink_to(outside / "run.fit")
    gen.make_fifo(folder / "pipe.fit")
    return folder


def garmin_nan(d: Path) -> Path:
    rows = [gen.sleep_row(gen.TODAY - timedelta(days=41), deepSleepSeconds=float("nan")),
            gen.sleep_row(gen.TODAY - timedelta(days=42), remSleepSeconds=-600),
            gen.sleep_row(gen.TODAY - timedelta(days=43), sleepEndTimestampGMT="2000-01-01T00:00:00.0")]
    return gen.garmin_json(d, "x_sleepData.json", rows)


GARMIN = [
    Case("garmin-metrics-is-an-integer", "garmin", gj("a_healthStatusData.json", [{"calendarDate": "2026-01-01", "metrics": 5}]), r"\(item 0\): metrics: expected a list, got int"),
    Case("garmin-aggregator-list-is-an-integer", "garmin", gj("UDSFile_1.json", [{"calendarDate": "2026-01-01", "allDayStress": {"aggregatorList": 7}}]), r"aggregatorList: expected a list, got int"),
    Case("garmin-json-nested-100k-deep", "garmin", gj("deep_sleepData.json", raw="[" * 100_000 + "]" * 100_000), r"JSON nested too deeply"),
    Case("garmin-epoch-out-of-range", "garmin", gj("e_sleepData.json", [{"calendarDate": "2026-01-01", "sleepStartTimestampGMT": 1e20, "sleepEndTimestampGMT": 2e20}]), rf"sleepStartTimestampGMT: epoch milliseconds 1e\+20 is {RANGE}"),
    Case("garmin-calendar-date-year-0001", "garmin", gj("d_sleepData.json", [{"calendarDate": "0001-01-01"}]), rf"calendarDate: day 0001-01-01 is {RANGE}"),
    Case("garmin-gmt-string-year-9999", "garmin", gj("g_sleepData.json", [gen.sleep_row(gen.TODAY, sleepEndTimestampGMT="9999-12-31T00:00:00.0")]), rf"sleepEndTimestampGMT: time .* is {RANGE}"),
    Case("garmin-json-not-utf8", "garmin", write("x_sleepData.json", b'[{"calendarDate": "2026-01-01", "x": "\xff\xfe"}]'), r"not UTF-8 JSON"),
    Case("garmin-json-invalid", "garmin", gj("x_sleepData.json", raw='[{"calendarDate": '), r"invalid JSON"),
    Case("garmin-fit-timestamp-year-2117", "garmin", fit_with(lambda t0: [fitgen.file_id(), fitgen.record(t0, 60), fitgen.record(0xF0000000, 61)]), rf"\(message 2\): record field timestamp: time 2117-.* is {RANGE}"),
    Case("garmin-fit-truncated", "garmin", fit_with(lambda t0: [fitgen.file_id(), *(fitgen.record(t0 + i, 60) for i in range(50))], truncate=200), r"truncated or corrupt FIT file"),
    Case("garmin-fit-crc-mismatch", "garmin", fit_flipped, r"corrupt FIT file"),
    Case("garmin-fit-binary-garbage", "garmin", write("x.fit", garbage(5000, 2)), r"x\.fit"),
    Case("garmin-fit-empty", "garmin", write("x.fit", b""), r"x\.fit"),
    Case("garmin-zip-member-declaring-512-mib", "garmin", garmin_zip_declaring(512 << 20), r"a FIT file \(536,870,912 bytes uncompressed\) is larger than 64 MiB; refused"),
    Case("garmin-zip-in-zip-in-zip", "garmin", garmin_nested(3), r"a zip inside a zip inside a zip; refused"),
    Case("garmin-truncated-zip", "garmin", garmin_truncated_zip, r"truncated or corrupt zip"),
    Case("garmin-empty-zip", "garmin", lambda d: gen.zipped(d, "export.zip", "readme.txt", b"nothing here"), r"no FIT files or Garmin Connect export JSON"),
    Case("garmin-symlinks-out-and-a-fifo", "garmin", garmin_links_out, r"no FIT files or Garmin Connect export JSON"),
    Case("garmin-nan-negative-and-backwards-nights", "garmin", garmin_nan, None,
         only_skips({"NaN or infinite value": 1, "negative sleep minutes": 1, "end before start": 1}, grew={"raw_garmin": 3})),
]


# -- WHOOP -----------------------------------------------------------------------------------------
def wc(rows: list[list[str]], header: list[str] | None = None, name: str = "physiological_cycles.csv") -> Callable[[Path], Path]:
    return write(name, gen.csv_text(header or gen.CYCLE_HEADER, rows))


def whoop_zip_declaring(size: int) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        p = gen.zipped(d, "my_whoop_data.zip", "physiological_cycles.csv", gen.csv_text(gen.CYCLE_HEADER, [gen.cycle_row(gen.TODAY)]).encode())
        gen.declare_size(p, "physiological_cycles.csv", size)
        return p

    return build


def whoop_truncated_zip(d: Path) -> Path:
    rows = [gen.cycle_row(gen.TODAY - timedelta(days=i)) for i in range(2, 400)]
    p = gen.zipped(d, "my_whoop_data.zip", "physiological_cycles.csv", gen.csv_text(gen.CYCLE_HEADER, rows).encode())
    p.write_bytes(p.read_bytes()[: p.stat().st_size - 200])
    return p


DAY = gen.TODAY - timedelta(days=10)
WHOOP = [
    Case("whoop-timezone-utc+25", "whoop", wc([gen.cycle_row(DAY, tz="UTC+25:00")]), r"\(line 2\): impossible timezone offset 'UTC\+25:00'"),
    Case("whoop-date-9999-12-31", "whoop", wc([["9999-12-31 22:30:00", "", "UTC-04:00", "65", "55", "48", "", ""]]), rf"\(line 2\): column 'Cycle start time': date-time '9999-12-31 22:30:00' is {RANGE}"),
    Case("whoop-date-year-1", "whoop", wc([["0001-01-01 00:00:00", "", "UTC+14:00", "65", "55", "48", "", ""]]), rf"\(line 2\): .* is {RANGE}"),
    Case("whoop-missing-columns", "whoop", wc([["2026-01-01 22:00:00"]], header=["Cycle start time"]), r"\(line 1\): missing columns: Cycle end time, Cycle timezone"),
    Case("whoop-extra-columns", "whoop", write("physiological_cycles.csv", gen.csv_text(gen.CYCLE_HEADER, [gen.cycle_row(DAY) + ["extra", "more"]])), r"\(line 2\): 10 fields, header has 8"),
    Case("whoop-not-a-number", "whoop", wc([gen.cycle_row(DAY, recovery="lots")]), r"\(line 2\): column 'Recovery score %': not a number"),
    Case("whoop-endless-line", "whoop", write("physiological_cycles.csv", ",".join(gen.CYCLE_HEADER) + "\n" + "9" * (3 << 20) + "\n"), r"\(line 2\): a line longer than 1 MiB; refused"),
    Case("whoop-nul-bytes", "whoop", write("physiological_cycles.csv", (",".join(gen.CYCLE_HEADER) + "\n").encode() + b"\x00\x01\x02,\x00\n"), r"\(line 2\): "),
    Case("whoop-latin1", "whoop", write("physiological_cycles.csv", gen.csv_text(gen.CYCLE_HEADER, [gen.cycle_row(DAY)]).replace("Cycle start time", "Cycle start tim\xe9").encode("latin-1")), r"not UTF-8 text"),
    Case("whoop-empty-file", "whoop", write("physiological_cycles.csv", b""), r"empty file, no header"),
    Case("whoop-binary-garbage", "whoop", write("physiological_cycles.csv", garbage(3000, 3)), r"physiological_cycles\.csv"),
    Case("whoop-zip-member-declaring-1-gib", "whoop", whoop_zip_declaring(1 << 30), r"a CSV file \(1,073,741,824 bytes uncompressed\) is larger than 64 MiB; refused"),
    Case("whoop-truncated-zip", "whoop", whoop_truncated_zip, r"truncated or corrupt zip"),
    Case("whoop-folder-without-csv", "whoop", lambda d: d, r"no WHOOP export CSV found"),
    Case("whoop-nan-and-inf", "whoop", wc([gen.cycle_row(DAY, recovery="NaN"), gen.cycle_row(DAY - timedelta(days=1), recovery="inf")]), None,
         only_skips({"NaN or infinite value": 2}, grew={"raw_whoop": 2, "samples": 2 * 3})),
]


# -- calendar (.ics) -------------------------------------------------------------------------------
def ev(uid: str, *extra: str, start: date | None = None, hh: int = 9) -> str:
    s = start or gen.TODAY - timedelta(days=30)
    return gen.ics_event(uid, f"DTSTART:{gen.ics_stamp(s, hh)}", f"DTEND:{gen.ics_stamp(s, hh + 1)}", *extra)


def ics(*events: str, tz: str = "") -> Callable[[Path], Path]:
    return write("calendar.ics", gen.ics_doc(*events, tz=tz))


EVIL_ZONE = ("BEGIN:VTIMEZONE\r\nTZID:Evil\r\nBEGIN:STANDARD\r\nDTSTART:19000101T000000\r\nTZOFFSETFROM:+0100\r\n"
             "TZOFFSETTO:+0000\r\nRRULE:FREQ=SECONDLY\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n")


def ics_too_large(d: Path) -> Path:
    p = d / "calendar.ics"
    with p.open("wb") as fh:  # sparse: 65 MiB that take no disk
        fh.write(gen.ics_doc().encode())
        fh.truncate(65 << 20)
    return p


def daily_million_check(summary: dict, before: dict, after: dict) -> None:
    start = gen.TODAY - timedelta(days=100)
    window_end = datetime.now(UTC) + timedelta(days=60)
    days = (window_end.date() - start).days
    assert summary["skipped"] == {}
    assert days - 1 <= after["events"][0] - before["events"][0] <= days + 1  # clipped to the window


CALENDAR = [
    Case("ics-secondly-count-100-million", "ics", ics(ev("sec", "RRULE:FREQ=SECONDLY;COUNT=100000000")), r"\(line \d+\): event 'sec': its recurrence \(FREQ=SECONDLY\) would expand to ~[\d,]+ occurrences .*refused"),
    Case("ics-secondly-endless", "ics", ics(ev("sec-endless", "RRULE:FREQ=SECONDLY")), r"event 'sec-endless': its recurrence \(FREQ=SECONDLY\)"),
    Case("ics-minutely-until-9999", "ics", ics(ev("minutely", "RRULE:FREQ=MINUTELY;UNTIL=99991231T000000Z")), r"event 'minutely': its recurrence \(FREQ=MINUTELY\)"),
    Case("ics-daily-every-ten-minutes", "ics", ics(ev("dense", "RRULE:FREQ=DAILY;BYHOUR=" + ",".join(map(str, range(24))) + ";BYMINUTE=0,10,20,30,40,50")), r"event 'dense': .* inside the import window; refused \(at most 10,000\)"),
    Case("ics-hourly-since-1900", "ics", ics(gen.ics_event("hourly", "DTSTART:19000101T000000Z", "DTEND:19000101T003000Z", "RRULE:FREQ=HOURLY")), r"event 'hourly': its recurrence \(FREQ=HOURLY\) would expand"),
    Case("ics-daily-count-1-million", "ics", ics(ev("daily", "RRULE:FREQ=DAILY;COUNT=1000000", start=gen.TODAY - timedelta(days=100))), None, daily_million_check),
    Case("ics-span-0001-to-9999", "ics", ics(gen.ics_event("span", "DTSTART:00010101T000000Z", "DTEND:99991231T000000Z")), rf"\(line 5\): event 'span': DTSTART 0001-01-01T00:00:00\+00:00 is {RANGE}"),
    Case("ics-all-day-0001-to-9999", "ics", ics(gen.ics_event("span-d", "DTSTART;VALUE=DATE:00010101", "DTEND;VALUE=DATE:99991231")), rf"event 'span-d': DTSTART 0001-01-01 is {RANGE}"),
    Case("ics-duration-overflow", "ics", ics(gen.ics_event("long", f"DTSTART:{gen.ics_stamp(gen.TODAY)}", "DURATION:P99999999D")), rf"event 'long': DTSTART \+ DURATION P99999999D is {RANGE}"),
    Case("ics-rule-that-never-matches", "ics", ics(ev("never", "RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30")), None, only_skips({}, grew={"raw_calendar": 1})),
    Case("ics-many-rules-that-never-match", "ics", ics(*(ev(f"never{i}", "RRULE:FREQ=DAILY;BYMONTH=4;BYMONTHDAY=31") for i in range(6))), r"more than 5 recurring events whose rules match no day at all"),
    Case("ics-vtimezone-secondly", "ics", ics(gen.ics_event("tz", f"DTSTART;TZID=Evil:{gen.ics_stamp(gen.TODAY)[:-1]}", f"DTEND;TZID=Evil:{gen.ics_stamp(gen.TODAY, 10)[:-1]}"), tz=EVIL_ZONE), r"a VTIMEZONE with an unusual recurrence \(RRULE:FREQ=SECONDLY\); refused"),
    Case("ics-end-before-start", "ics", ics(gen.ics_event("back", f"DTSTART:{gen.ics_stamp(gen.TODAY, 10)}", f"DTEND:{gen.ics_stamp(gen.TODAY, 9)}"), gen.ics_event("neg", f"DTSTART:{gen.ics_stamp(gen.TODAY)}", "DURATION:-PT1H")), None,
         only_skips({"end before start": 2}, grew={"raw_calendar": 2})),
    Case("ics-truncated", "ics", write("calendar.ics", gen.ics_doc(ev("cut"))[:120]), r"truncated iCalendar file"),
    Case("ics-binary-garbage", "ics", write("calendar.ics", garbage(2000, 4)), r"not an iCalendar file"),
    Case("ics-empty", "ics", write("calendar.ics", b""), r"not an iCalendar file"),
    Case("ics-larger-than-64-mib", "ics", ics_too_large, r"an \.ics file is larger than 64 MiB; refused"),
    Case("ics-sixty-thousand-minimal-events", "ics", ics(*(f"BEGIN:VEVENT\r\nUID:m{i}\r\nDTSTART:20260101T090000Z\r\nEND:VEVENT\r\n" for i in range(60_000))),
         r"60,000 events in one file; refused \(at most 50,000: split the calendar\)"),
    Case("ics-folder-without-ics", "ics", lambda d: d, r"no \.ics files in this folder"),
    Case("ics-symlink-leading-out", "ics", lambda d: _linked_out(d, "cal.ics", gen.good_ics), r"no \.ics files in this folder"),
]


def _linked_out(d: Path, name: str, build: Callable[[Path], Path]) -> Path:
    outside = d / "outside"
    outside.mkdir()
    folder = d / "linked"
    folder.mkdir()
    (folder / name).symlink_to(build(outside))
    return folder


def tasks_fifo(d: Path) -> Path:
    return gen.make_fifo(d / "tasks.csv")


def tasks_zip_declaring(size: int) -> Callable[[Path], Path]:
    """A zip whose tasks.csv member declares `size` bytes uncompressed (never read)."""
    def build(d: Path) -> Path:
        p = d / "tasks.zip"
        with zipfile.ZipFile(p, "w") as zf:
            zf.writestr("tasks.csv", "title,completed_at\nA,2024-01-01T10:00:00+00:00\n")
        data = bytearray(p.read_bytes())
        for sig, off in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):  # central and local headers
            i = data.find(sig)
            data[i + off:i + off + 4] = size.to_bytes(4, "little")
        p.write_bytes(bytes(data))
        return p

    return build


TASKS_HEADER = "title,completed_at\n"
TASKS = [
    Case("tasks-year-9999", "tasks", write("tasks.csv", TASKS_HEADER + "A,9999-01-01T10:00:00+00:00\n"), r"\(line 2\): completion time .* is outside"),
    Case("tasks-ambiguous-date", "tasks", write("tasks.csv", TASKS_HEADER + "A,03/01/2024\n"), r"\(line 2\): cannot read the completion time '03/01/2024'"),
    Case("tasks-empty-file", "tasks", write("tasks.csv", b""), r"no header row naming a title and a completion column"),
    Case("tasks-binary-garbage", "tasks", write("tasks.csv", garbage(3000, 7)), r"not UTF-8 text|no header row"),
    Case("tasks-extra-fields", "tasks", write("tasks.csv", TASKS_HEADER + "A,2024-01-01T10:00:00+00:00,x,y\n"), r"\(line 2\): 4 fields where the header has 2"),
    Case("tasks-fifo-instead-of-file", "tasks", tasks_fifo, r"not a regular file or folder"),
    Case("tasks-zip-member-declared-3-gib", "tasks", tasks_zip_declaring(3 << 30), r"a tasks file .* is larger than 64 MiB; refused|damaged|corrupt"),
    Case("tasks-truncated-json", "tasks", write("Tasks.json", '{"kind": "tasks#taskLists", "items": [{"title": "x", "items": [{'), r"Tasks.json"),
]



def takeout(**task: object) -> Callable[[Path], Path]:
    """A Google Takeout Tasks.json whose one task has these fields (issue 41: malformed shapes)."""
    base = {"id": "t1", "title": "A", "status": "completed", "completed": "2024-01-01T10:00:00.000Z"}
    return write("Tasks.json", json.dumps({"items": [{"id": "L1", "title": "List", "items": [{**base, **task}]}]}))


TAKEOUT = [
    Case("tasks-json-completed-is-a-number", "tasks", takeout(completed=123), r"\(list 1, task 1\): completed: expected text, got int"),
    Case("tasks-json-completed-is-an-object", "tasks", takeout(completed={"a": 1}), r"completed: expected text, got an object"),
    Case("tasks-json-completed-not-a-time", "tasks", takeout(completed="yesterday"), r"completed: not an RFC 3339 time: 'yesterday'"),
    Case("tasks-json-completed-year-9999", "tasks", takeout(completed="9999-01-01T10:00:00.000Z"), RANGE),
    Case("tasks-json-id-is-a-list", "tasks", takeout(id=[1, 2]), r"id: expected text, got a list"),
    Case("tasks-json-title-is-an-object", "tasks", takeout(title={"x": 1}), r"title: expected text, got an object"),
    Case("tasks-json-status-is-a-number", "tasks", takeout(status=5), r"status: expected text, got int"),
    Case("tasks-json-task-is-a-list", "tasks", write("Tasks.json", json.dumps({"items": [{"id": "L", "items": [[1, 2]]}]})), r"\(list 1, task 1\): a task is a list, expected an object"),
    Case("tasks-json-list-id-is-an-object", "tasks", write("Tasks.json", json.dumps({"items": [{"id": {"a": 1}, "items": []}]})), r"\(list 1\): a task list without an id"),
    Case("tasks-json-nested-100k-deep", "tasks", write("Tasks.json", "[" * 100_000 + "]" * 100_000), r"JSON nested too deeply"),
    Case("tasks-json-top-level-list", "tasks", write("Tasks.json", "[1, 2]"), r"not a Google Takeout Tasks\.json"),
]

CASES = HEALTHKIT + GARMIN + WHOOP + CALENDAR + TASKS + TAKEOUT
PATHS = ["python"] + (["native"] if native._Scanner is not None else [])


def test_the_suite_is_at_least_forty_cases_over_the_file_importers():
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)
    assert {c.source for c in CASES} == {"healthkit", "garmin", "whoop", "ics", "tasks"}


def run_case(case: Case, sealed: Sealed) -> None:
    before = snapshot(sealed.db)
    home_before = tree(sealed.home)
    target = case.build(sealed.input)
    input_before = tree(sealed.input)
    rc, out, err = sealed.run_cli("import", case.source, target, "--json")
    lines = err.strip().splitlines()
    if case.error is not None:
        assert rc != 0, f"accepted: {out[-500:]}"
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert str(target) in lines[0] or target.name in lines[0], lines[0]
        assert re.search(case.error, lines[0]), lines[0]
        assert snapshot(sealed.db) == before
    else:
        assert rc == 0 and lines == [], err
        assert case.check is not None
        case.check(json.loads(out), before, snapshot(sealed.db))
    assert tree(sealed.input) == input_before  # nothing written next to the input
    for place in sealed.places:  # nor in the working directory, HOME or TMPDIR
        assert not any(place.iterdir()), f"{place.name}: {sorted(os.listdir(place))}"
    assert set(home_before) <= set(tree(sealed.home))  # RHYTHM_HOME: nothing lost


@pytest.mark.parametrize("case", [c for c in CASES if c.source != "healthkit"], ids=str)
def test_hostile_input(case: Case, sealed: Sealed):
    run_case(case, sealed)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", HEALTHKIT, ids=str)
def test_hostile_apple_health_export_on_each_parser_path(case: Case, path: str, sealed: Sealed, monkeypatch):
    monkeypatch.setenv(native.DISABLE_ENV, "1" if path == "python" else "0")
    run_case(case, sealed)
