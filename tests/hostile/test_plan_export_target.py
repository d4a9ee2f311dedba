"""`rhythm plan export --ics PATH` never overwrites a person's file (issue 41).

It writes a new file, an empty one, or one Rhythm itself wrote (its PRODID inside); a person's
calendar or notes are refused in one line (``--force`` replaces a regular file for a person
who means it); a symlink, a FIFO or a device is refused even with ``--force``. A refusal
comes before anything is planned: the database and the file are exactly as before."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from connectors.calendar.ics_write import PRODID
from tests.hostile import inputs as gen
from tests.hostile.conftest import Sealed, snapshot

PERSONS_CALENDAR = gen.ics_doc(gen.ics_event("mine", "DTSTART:20260101T090000Z", "DTEND:20260101T100000Z"))
NOTES = "shopping: milk, eggs\nPRODID:" + PRODID + "\n"  # quoting the mark is not being Rhythm's file


def own(name: str, text: str | bytes) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        p = d / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        return p

    return build


def link_to(build: Callable[[Path], Path]) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        real = build(d)
        link = d / "linked.ics"
        link.symlink_to(real)
        return link

    return make


def fifo(d: Path) -> Path:
    return gen.make_fifo(d / "pipe.ics")


def device(_d: Path) -> Path:
    return Path("/dev/null")


def rhythm_file(d: Path) -> Path:
    return own("old.ics", f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:{PRODID}\r\nEND:VCALENDAR\r\n")(d)


# (id, build, --force, what the one line says)
REFUSED = [
    ("a-persons-calendar", own("calendar.ics", PERSONS_CALENDAR), False, "was not written by Rhythm"),
    ("a-notes-file", own("notes.txt", NOTES), False, "was not written by Rhythm"),
    ("a-binary-file", own("photo.ics", os.urandom(2000)), False, "was not written by Rhythm"),
    ("a-fifo", fifo, False, "named pipe"),
    ("a-fifo-with-force", fifo, True, "named pipe (FIFO); refused, even with --force"),
    ("a-device", device, False, "is a device"),
    ("a-device-with-force", device, True, "is a device; refused, even with --force"),
    ("a-symlink-to-a-persons-file", link_to(own("calendar.ics", PERSONS_CALENDAR)), False, "symbolic link"),
    ("a-symlink-with-force", link_to(own("calendar.ics", PERSONS_CALENDAR)), True, "symbolic link"),
    ("a-symlink-to-rhythms-own-file", link_to(rhythm_file), False, "symbolic link"),
    ("a-folder", lambda d: d, False, "is a folder"),
    ("a-missing-folder", lambda d: d / "nowhere" / "x.ics", False, "no such folder"),
]


def contents(p: Path) -> bytes | None:
    try:
        return p.read_bytes() if p.is_file() and not p.is_symlink() else (
            p.resolve().read_bytes() if p.is_symlink() and p.resolve().is_file() else None)
    except OSError:
        return None


@pytest.mark.parametrize(("case", "build", "force", "says"), REFUSED, ids=[r[0] for r in REFUSED])
def test_plan_export_refuses_to_overwrite_what_is_not_its_own(case, build, force, says, sealed: Sealed):
    target = build(sealed.input)
    before, kept = snapshot(sealed.db), contents(target)
    args = ["plan", "export", "--ics", target] + (["--force"] if force else [])
    rc, _out, err = sealed.run_cli(*args)
    lines = err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], err
    assert snapshot(sealed.db) == before  # refused before anything was planned
    assert contents(target) == kept
    if target.is_symlink():
        assert target.is_symlink()  # still the link


def test_plan_export_writes_new_empty_and_its_own_files_and_force_replaces(sealed: Sealed):
    new = sealed.input / "plan.ics"
    rc, _, err = sealed.run_cli("plan", "export", "--ics", new)
    assert rc == 0, err
    assert f"PRODID:{PRODID}" in new.read_text()
    rc, _, err = sealed.run_cli("plan", "export", "--ics", new)  # its own file: replaced
    assert rc == 0, err
    empty = sealed.input / "empty.ics"
    empty.touch()
    rc, _, err = sealed.run_cli("plan", "export", "--ics", empty)
    assert rc == 0 and f"PRODID:{PRODID}" in empty.read_text(), err
    old = rhythm_file(sealed.input)
    rc, _, err = sealed.run_cli("plan", "export", "--ics", old)
    assert rc == 0 and "BEGIN:VEVENT" in old.read_text(), err
    notes = own("notes.ics", NOTES)(sealed.input)
    rc, _, err = sealed.run_cli("plan", "export", "--ics", notes, "--force")  # the person means it
    assert rc == 0 and f"PRODID:{PRODID}" in notes.read_text(), err
