"""Walk a Garmin input (FIT file, folder, zip, account-export zip or folder) and decode it.

Inputs accepted by ``read_export``:

- one ``.fit`` file;
- a folder: every ``*.fit`` below it, every ``*.zip`` below it (opened, see next), and the
  account-export wellness JSON files (``connect_export.kind_of``); only regular files, and
  no symlink leading out of the folder (``connectors.files``);
- a ``.zip``: the same, for its members; zips inside it (``DI-Connect-Uploaded-Files/*.zip``
  in the account export) are opened too, one level deep.

Other files are ignored. Any corrupt FIT, JSON or zip aborts the whole import with one
``SourceFormatError`` naming the file (``outer.zip:member`` inside zips) and the position.

Sizes (README "Bad input"): a FIT or JSON file is decoded in memory, so one larger than
``MAX_FIT`` / ``MAX_JSON`` is refused before it is read (its size on disk, or the size a zip
declares for it, and the bytes counted while it is streamed out of the zip); a zip inside
the zip is streamed to an anonymous temporary file (memory stays flat) up to
``MAX_NESTED_ZIP``.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from common.errors import SourceFormatError
from connectors.files import (
    CappedStream,
    GiB,
    MiB,
    check_member,
    files_under,
    input_path,
    read_file_capped,
    read_member,
)
from connectors.garmin import connect_export
from connectors.garmin.fit import read_fit
from connectors.screen import READ_ERRORS, describe, screen

Progress = Callable[[float, float | None], None]

_ZIP_ERRORS = (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, ValueError, OSError)

# The largest FIT files seen are a few MB (a 24 h activity at 1 s with beat-to-beat HRV is
# ~5-10 MB). What a FIT file costs in memory is bounded by fit.MAX_MESSAGES; this cap bounds
# the bytes read into memory first.
MAX_FIT = 64 * MiB
# Account-export wellness JSON files hold a few hundred days each (~1-5 MB).
MAX_JSON = 64 * MiB
# Nested zips (DI-Connect-Uploaded-Files parts) hold years of uploaded FIT files.
MAX_NESTED_ZIP = 4 * GiB
_SPOOL_IN_MEMORY = 16 * MiB  # a nested zip smaller than this stays in memory


def read_export(path: str | Path, progress: Progress | None = None, **_opts: Any) -> Iterator[Any]:
    """Yield raw and normalised records from Garmin files at ``path``."""
    path = input_path(path)
    yield from screen(_read(path, progress), "garmin", label=str(path))


def _read(path: Path, progress: Progress | None) -> Iterator[Any]:
    fetched_at = datetime.now(UTC)
    found = [0]
    if path.is_dir():
        files = files_under(path)
        total = sum(p.stat().st_size for p in files)
        done = 0
        for p in files:
            yield from _file(p, fetched_at, found)
            done += p.stat().st_size
            if progress:
                progress(done, total)
    else:
        yield from _file(path, fetched_at, found, progress=progress)
        if progress:
            size = path.stat().st_size
            progress(size, size)
    if not found[0]:
        raise SourceFormatError(
            str(path), "no FIT files or Garmin Connect export JSON (sleepData, healthStatusData, "
            "UDSFile) found"
        )


def _file(p: Path, fetched_at: datetime, found: list[int], progress: Progress | None = None) -> Iterator[Any]:
    """One file on disk: a FIT, a wellness JSON or a zip (opened in place: exports reach GBs)."""
    name = str(p)
    lower = name.lower()
    if lower.endswith(".zip"):
        with p.open("rb") as fh:
            yield from _zip(fh, p.stat().st_size, name, fetched_at, found, progress, depth=1)
        return
    kind = _kind(lower, name)
    if kind is None:
        return
    found[0] += 1
    cap, what = _cap(kind)
    data = read_file_capped(p, cap, what)
    yield from _decode(kind, data, name, fetched_at)


def _kind(lower: str, name: str) -> str | None:
    if lower.endswith(".fit"):
        return "fit"
    return connect_export.kind_of(name)


def _cap(kind: str) -> tuple[int, str]:
    return (MAX_FIT, "a FIT file") if kind == "fit" else (MAX_JSON, "a JSON file")


def _decode(kind: str, data: bytes, name: str, fetched_at: datetime) -> Iterator[Any]:
    try:
        if kind == "fit":
            yield from read_fit(data, name, fetched_at)
        else:
            yield from connect_export.read_json(data, name, kind, fetched_at)
    except READ_ERRORS as exc:  # last resort behind the readers' own checks: one line
        raise SourceFormatError(name, describe(exc)) from exc


def _zip(
    fh: IO[bytes], size: int, name: str, fetched_at: datetime, found: list[int],
    progress: Progress | None, depth: int,
) -> Iterator[Any]:
    try:
        zf = zipfile.ZipFile(fh)
        members = sorted((i for i in zf.infolist() if not i.is_dir()), key=lambda i: i.filename)
    except _ZIP_ERRORS as exc:
        raise SourceFormatError(
            name, f"truncated or corrupt zip: {exc}", f"byte {size} (end of file)"
        ) from None
    total = sum(i.compress_size for i in members) or None
    done = 0
    with zf:
        for info in members:
            yield from _member(zf, info, name, fetched_at, found, depth)
            done += info.compress_size
            if progress and total:
                progress(done * size / total, size)


def _member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, fetched_at: datetime, found: list[int], depth: int,
) -> Iterator[Any]:
    member = f"{name}:{info.filename}"
    lower = info.filename.lower()
    where = f"byte {info.header_offset} of {name}"
    if lower.endswith(".zip"):
        if depth >= 2:
            raise SourceFormatError(member, "a zip inside a zip inside a zip; refused (the account export nests one level)")
        check_member(info, MAX_NESTED_ZIP, member, "a zip inside the zip")
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY) as spool:
            try:
                with zf.open(info) as src:
                    shutil.copyfileobj(CappedStream(src, MAX_NESTED_ZIP, member, "a zip inside the zip"), spool, 1 << 20)
            except _ZIP_ERRORS as exc:
                raise SourceFormatError(member, f"truncated or corrupt zip member: {exc}", where) from None
            size = spool.tell()
            spool.seek(0)
            yield from _zip(spool, size, member, fetched_at, found, None, depth + 1)  # type: ignore[arg-type]
        return
    kind = _kind(lower, info.filename)
    if kind is None:
        return
    found[0] += 1
    cap, what = _cap(kind)
    try:
        data = read_member(zf, info, cap, member, what)
    except _ZIP_ERRORS as exc:
        raise SourceFormatError(member, f"truncated or corrupt zip member: {exc}", where) from None
    yield from _decode(kind, data, member, fetched_at)

