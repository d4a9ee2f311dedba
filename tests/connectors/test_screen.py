"""connectors.screen and connectors.files: what every connector refuses, leaves out, reads."""

from __future__ import annotations

import io
import os
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from common.errors import SourceFormatError
from common.records import Event, RawRecord, Sample, Skipped, SleepSession, Workout
from common.timeutil import SANE_RANGE, in_sane_range
from connectors import files, screen

T0 = datetime(2026, 3, 1, 8, tzinfo=UTC)
DAY = T0.date()


def sample(value=60.0, start=T0, end=T0, day=DAY) -> Sample:
    return Sample("garmin", "heart_rate", start, end, value, "bpm", day)


def night(**kw) -> SleepSession:
    base = dict(source="whoop", session_id="s", start_ts=T0, end_ts=T0 + timedelta(hours=8), local_day=DAY)
    return SleepSession(**{**base, **kw})


def event(start=T0, end=T0 + timedelta(hours=1)) -> Event:
    return Event("calendar", "c", "e", start, end, False, start.date())


@pytest.mark.parametrize(("rec", "reason"), [
    (sample(), None),
    (sample(float("nan")), screen.NOT_FINITE),
    (sample(float("-inf")), screen.NOT_FINITE),
    (sample(None), None),  # a pending score: None is "missing", not impossible
    (sample(start=T0, end=T0 - timedelta(seconds=1)), screen.END_BEFORE_START),
    (night(), None),
    (night(deep_min=-1.0), screen.NEGATIVE_SLEEP),
    (night(sleep_min=float("inf")), screen.NOT_FINITE),
    (night(end_ts=T0 - timedelta(minutes=1), in_bed_min=-1.0), screen.END_BEFORE_START),
    (Workout("whoop", "w", T0, T0 + timedelta(hours=1), DAY, "run", energy_kcal=float("nan")), screen.NOT_FINITE),
    (event(), None),
    (event(end=T0 - timedelta(hours=1)), screen.END_BEFORE_START),
    (RawRecord("whoop", "cycle", "k", "{}", T0), None),
])
def test_problem_names_the_reason_a_row_is_left_out(rec, reason):
    assert screen.problem(rec) == reason


@pytest.mark.parametrize(("ts", "inside"), [
    (datetime(1900, 1, 1, tzinfo=UTC), True),
    (datetime(1899, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), False),
    (datetime(2100, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), True),
    (datetime(2100, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-1))), False),  # 2101 in UTC
    (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))), False),  # year 0 in UTC, no overflow
    (datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14))), False),
    (datetime(1950, 6, 1), True),  # naive: read as UTC
    (date(2100, 12, 31), True),
    (date(1, 1, 1), False),
])
def test_the_sane_range(ts, inside):
    assert in_sane_range(ts) is inside


def test_screen_refuses_out_of_range_in_files_and_counts_it_for_apis():
    far = sample(start=datetime(2200, 1, 1, tzinfo=UTC), end=datetime(2200, 1, 1, tzinfo=UTC), day=date(2200, 1, 1))
    records = [sample(), sample(float("nan")), far, event(end=T0 - timedelta(hours=1))]
    with pytest.raises(SourceFormatError, match=f"x.fit: start_ts 2200-01-01 00:00:00\\+00:00 is outside the accepted range {SANE_RANGE}"):
        list(screen.screen(records, "garmin", label="x.fit"))
    out = list(screen.screen(records, "garmin", refuse=False))
    assert out == [records[0], Skipped("garmin", screen.NOT_FINITE), Skipped("garmin", screen.OUT_OF_RANGE),
                   Skipped("garmin", screen.END_BEFORE_START)]


def test_describe_is_one_line():
    assert screen.describe(RecursionError("deep")) == "nested too deeply to read"
    assert screen.describe(LookupError("unknown encoding: x")) == "unknown text encoding (unknown encoding: x)"
    line = screen.describe(TypeError("a\nb\nc"))
    assert line == "unreadable input (TypeError: a)" and "\n" not in line


def test_folder_walk_reads_regular_files_inside_only(tmp_path):
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    (root / "a.fit").write_bytes(b"a")
    (root / "sub" / "b.fit").write_bytes(b"b")
    (root / "inside_link.fit").symlink_to(root / "a.fit")
    outside = tmp_path / "secret.json"
    outside.write_text("{}")
    (root / "outside_link.json").symlink_to(outside)
    (root / "zero.fit").symlink_to("/dev/zero")
    (root / "dangling.fit").symlink_to(tmp_path / "nowhere")
    (root / "linked_dir").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(root / "pipe.fit")
    names = [str(p.relative_to(root)) for p in files.files_under(root)]
    assert names == ["a.fit", "inside_link.fit", "sub/b.fit"]


def test_input_path_refuses_what_is_not_a_file_or_folder(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(SourceFormatError, match="not a regular file or folder"):
        files.input_path(tmp_path / "pipe")
    with pytest.raises(SourceFormatError, match="no such file or folder"):
        files.input_path(tmp_path / "missing")
    assert files.input_path(tmp_path) == tmp_path


def test_capped_reads(tmp_path):
    assert files.read_capped(io.BytesIO(b"x" * 10), 10, "f", "a file") == b"x" * 10
    with pytest.raises(SourceFormatError, match="a file is larger than"):
        files.read_capped(io.BytesIO(b"x" * 11), 10, "f", "a file")
    stream = files.CappedStream(io.BytesIO(b"y" * 100), 64, "f.zip:m", "a member")
    assert stream.read(64) == b"y" * 64
    with pytest.raises(SourceFormatError, match="f.zip:m: a member is larger than"):
        stream.read(1)
