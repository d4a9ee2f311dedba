"""One set of file-safety rules for every file importer (connectors/files.py, issue 41).

The same hostile files go through EVERY importer in connectors/registry.py (a new importer
joins by adding its member name below; the first test fails until it does): a zip member
declaring 9 GiB, a zip member that expands ~1000 times (48 MiB of blanks in ~50 KiB), a
folder whose only file is a symlink leading out of it, and one whose only file is a symlink
to /dev/zero. Each is refused with one `error:` line, the database exactly as before, and the
import's Python allocations bounded (tracemalloc peak well under the member's size).
"""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from connectors.files import MAX_RATIO, MiB
from connectors.registry import file_imports
from tests.hostile import inputs as gen
from tests.hostile.conftest import Sealed, snapshot

BLANKS = 48 * MiB  # under every importer's per-file cap (64 MiB and up), 1000 times its compressed size
PEAK = 24 * MiB  # reading the member whole would allocate 48 MiB and more


def _tasks(d: Path) -> Path:
    p = d / "tasks.csv"
    p.write_text("title,completed_at\nA,2024-01-01T10:00:00+00:00\n")
    return p


def _hae(d: Path) -> Path:
    p = d / "HealthAutoExport-2024-03-04.json"
    p.write_text(json.dumps({"data": {"metrics": [{"name": "step_count", "units": "count", "data": [
        {"date": "2024-03-04 08:00:00 +0100", "qty": 120, "source": "iPhone"}]}], "workouts": []}}))
    return p


# importer -> (the member or file name it reads, how the member starts, a good file of it)
KINDS: dict[str, tuple[str, bytes, Callable[[Path], Path]]] = {
    "healthkit": ("apple_health_export/export.xml", gen.hk_doc("").split("</HealthData>")[0].encode(), gen.good_healthkit),
    "whoop": ("physiological_cycles.csv", (",".join(gen.CYCLE_HEADER) + "\n").encode(), gen.good_whoop),
    "ics": ("calendar.ics", b"BEGIN:VCALENDAR\r\nVERSION:2.0\r\n", gen.good_ics),
    "garmin": ("DI_CONNECT/DI-Connect-Uploaded-Files/run.fit", b"", gen.good_fit),
    "hae": ("HealthAutoExport-2024-03-04.json", b'{"data": {"metrics": [', _hae),
    "tasks": ("tasks.csv", b"title,completed_at\n", _tasks),
}
IMPORTERS = list(file_imports())


def test_every_file_importer_is_covered():
    assert set(KINDS) == set(IMPORTERS)


def oversize(name: str, d: Path) -> Path:
    member, head, _good = KINDS[name]
    p = gen.zipped(d, "export.zip", member, head + b" " * 1000)
    gen.declare_size(p, member, 9 << 30)
    return p


def high_ratio(name: str, d: Path) -> Path:
    member, head, _good = KINDS[name]
    p = d / "export.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf, zf.open(member, "w", force_zip64=False) as fh:
        fh.write(head)
        block = b" " * MiB
        for _ in range(BLANKS // MiB):
            fh.write(block)
    info = zipfile.ZipFile(p).getinfo(member)
    assert info.file_size > MAX_RATIO * info.compress_size
    return p


def link_out(name: str, d: Path) -> Path:
    member, _head, good = KINDS[name]
    outside = d / "outside"
    outside.mkdir()
    built = good(outside)
    target = built if built.is_file() else next(p for p in sorted(built.rglob("*")) if p.is_file())
    folder = d / "folder"
    folder.mkdir()
    (folder / Path(member).name).symlink_to(target)
    return folder


def link_to_dev_zero(name: str, d: Path) -> Path:
    member = KINDS[name][0]
    folder = d / "folder"
    folder.mkdir()
    (folder / Path(member).name).symlink_to("/dev/zero")
    return folder


HOSTILE = {"zip-member-declaring-9-gib": oversize, "zip-member-expanding-1000x": high_ratio,
           "symlink-leading-out-of-the-folder": link_out, "symlink-to-dev-zero": link_to_dev_zero}
# what the one line says, where the importer reads zips (ics does not: a zip is not a calendar)
SAYS = {"zip-member-declaring-9-gib": r"larger than|damaged|corrupt|not an iCalendar",
        "zip-member-expanding-1000x": r"expands \d[\d,]* times .*refused|not an iCalendar"}


@pytest.mark.parametrize("hostile", list(HOSTILE))
@pytest.mark.parametrize("importer", IMPORTERS)
def test_every_importer_refuses_the_same_hostile_files(importer: str, hostile: str, sealed: Sealed):
    import re

    target = HOSTILE[hostile](importer, sealed.input)
    before = snapshot(sealed.db)
    tracemalloc.start()
    try:
        rc, out, err = sealed.run_cli("import", importer, target, "--json")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    lines = err.strip().splitlines()
    assert rc != 0, f"accepted: {out[-300:]}"
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert str(target) in lines[0] or target.name in lines[0], lines[0]
    if hostile in SAYS:
        assert re.search(SAYS[hostile], lines[0]), lines[0]
    assert peak < PEAK, f"peak {peak / MiB:.1f} MiB"
    assert snapshot(sealed.db) == before
