"""Walk a Garmin input (FIT file, folder, zip, account-export zip or folder) and decode it.

Inputs accepted by ``read_export``:

- one ``.fit`` file;
- a folder: every ``*.fit`` below it, every ``*.zip`` below it (opened, see next), and the
  account-export wellness JSON files (``connect_export.kind_of``);
- a ``.zip``: the same, for its members; zips inside it (``DI-Connect-Uploaded-Files/*.zip``
  in the account export) are opened too.

Other files are ignored. Any corrupt FIT, JSON or zip aborts the whole import with one
``SourceFormatError`` naming the file (``outer.zip:member`` inside zips) and the position.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common.errors import SourceFormatError
from connectors.garmin import connect_export
from connectors.garmin.fit import read_fit

Progress = Callable[[float, float | None], None]

_ZIP_ERRORS = (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, ValueError)


def read_export(path: str | Path, progress: Progress | None = None, **_opts: Any) -> Iterator[Any]:
    """Yield raw and normalised records from Garmin files at ``path``."""
    path = Path(path).expanduser()
    fetched_at = datetime.now(UTC)
    found = [0]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        total = sum(p.stat().st_size for p in files)
        done = 0
        for p in files:
            yield from _one(p.read_bytes, str(p), fetched_at, found)
            done += p.stat().st_size
            if progress:
                progress(done, total)
    elif path.is_file():
        yield from _one(path.read_bytes, str(path), fetched_at, found, progress=progress)
        if progress:
            size = path.stat().st_size
            progress(size, size)
    else:
        raise SourceFormatError(str(path), "no such file or folder")
    if not found[0]:
        raise SourceFormatError(
            str(path), "no FIT files or Garmin Connect export JSON (sleepData, healthStatusData, "
            "UDSFile) found"
        )


def _one(
    read: Callable[[], bytes], name: str, fetched_at: datetime, found: list[int],
    progress: Progress | None = None, top_level: bool = True,
) -> Iterator[Any]:
    lower = name.lower()
    if lower.endswith(".fit"):
        found[0] += 1
        yield from read_fit(read(), name, fetched_at)
    elif lower.endswith(".zip"):
        # a zip on disk is opened in place (account exports reach GBs); nested ones in memory
        source = name if top_level and Path(name).is_file() else read
        yield from _zip(source, name, fetched_at, found, progress if top_level else None)
    else:
        kind = connect_export.kind_of(name)
        if kind is not None:
            found[0] += 1
            yield from connect_export.read_json(read(), name, kind, fetched_at)


def _zip(
    source: str | Callable[[], bytes], name: str, fetched_at: datetime, found: list[int],
    progress: Progress | None,
) -> Iterator[Any]:
    if isinstance(source, str):
        size = Path(source).stat().st_size
        opened: Any = source
    else:
        data = source()
        size = len(data)
        opened = io.BytesIO(data)
    try:
        zf = zipfile.ZipFile(opened)
        members = sorted((i for i in zf.infolist() if not i.is_dir()), key=lambda i: i.filename)
    except _ZIP_ERRORS as exc:
        raise SourceFormatError(
            name, f"truncated or corrupt zip: {exc}", f"byte {size} (end of file)"
        ) from None
    total = sum(i.compress_size for i in members) or None
    done = 0
    with zf:
        for info in members:
            member = f"{name}:{info.filename}"

            def read_member(info: zipfile.ZipInfo = info, member: str = member) -> bytes:
                try:
                    return zf.read(info)
                except _ZIP_ERRORS as exc:
                    raise SourceFormatError(
                        member, f"truncated or corrupt zip member: {exc}",
                        f"byte {info.header_offset} of {name}",
                    ) from None

            yield from _one(read_member, member, fetched_at, found, top_level=False)
            done += info.compress_size
            if progress and total:
                progress(done * size / total, size)
