"""Reading input files safely: regular files only, folders walked without leaving them, zip
members streamed under a size cap (issue 22) and a compression-ratio cap (issue 41). Every
file importer reads through these rules (tests/hostile/test_file_rules.py runs the same
hostile files through each one of connectors/registry.py).

- The path given must be a regular file or a folder (not a FIFO, a device, a socket).
- In a folder, only regular files are read; a symlink whose target lies outside the folder
  is never followed (a hostile folder cannot make an import read `~/.ssh/...` or
  `/dev/zero`); symlinked folders are not entered.
- A zip member is streamed; its size (declared in the zip and counted while reading, since
  a header can lie) must stay under a cap chosen per kind of member (`connectors/*/README`
  say which and why). Files read whole into memory (FIT, JSON, .ics) have a cap as well.
- A compressed member larger than ``RATIO_FLOOR`` must not expand more than ``MAX_RATIO``
  times its compressed size (a zip bomb is refused before any of it is read; real exports
  compress 2-30 times). The zip module never returns more than a member declares, so the
  declared sizes bound what is read.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path
from typing import IO

from common.errors import SourceFormatError

MiB = 1 << 20
GiB = 1 << 30
MAX_RATIO = 200  # uncompressed / compressed size of one zip member, at most
RATIO_FLOOR = 8 * MiB  # members smaller than this are not ratio-checked (tiny files compress well)


def size_text(n: int) -> str:
    return f"{n / GiB:g} GiB" if n >= GiB else f"{n / MiB:g} MiB"


def input_path(path: str | Path) -> Path:
    """`path` (user-expanded) if it is a regular file or a folder, else SourceFormatError."""
    p = Path(path).expanduser()
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise SourceFormatError(str(p), "no such file or folder") from None
    except OSError as exc:
        raise SourceFormatError(str(p), f"cannot read: {exc.strerror or exc}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise SourceFormatError(str(p), "not a regular file or folder")
    return p


def files_under(root: Path) -> list[Path]:
    """Regular files below `root`, sorted; symlinks that lead outside `root` (or to anything
    but a regular file) are left out, symlinked folders are not entered."""
    base = root.resolve()
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in filenames:
            p = Path(dirpath) / name
            try:
                if p.is_symlink():
                    target = p.resolve(strict=True)
                    if not target.is_relative_to(base):
                        continue
                if not stat.S_ISREG(p.stat().st_mode):
                    continue
            except (OSError, RuntimeError):  # a dangling or looping link
                continue
            out.append(p)
    return sorted(out)


def too_large(label: str, cap: int, what: str, position: str | None = None) -> SourceFormatError:
    return SourceFormatError(label, f"{what} is larger than {size_text(cap)}; refused (a damaged or hostile file?)", position)


def read_capped(fh: IO[bytes], cap: int, label: str, what: str) -> bytes:
    """The whole stream, or SourceFormatError once it holds more than `cap` bytes. Read in
    pieces: ``read(cap + 1)`` would allocate the whole cap even for a small file."""
    chunks: list[bytes] = []
    n = 0
    while n <= cap:
        piece = fh.read(min(1 << 20, cap + 1 - n))
        if not piece:
            break
        chunks.append(piece)
        n += len(piece)
    if n > cap:
        raise too_large(label, cap, what)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_file_capped(path: Path, cap: int, what: str) -> bytes:
    if path.stat().st_size > cap:
        raise too_large(str(path), cap, what)
    with path.open("rb") as fh:
        return read_capped(fh, cap, str(path), what)


def check_member(info: zipfile.ZipInfo, cap: int, label: str, what: str) -> None:
    """Refuse a zip member whose declared size is over `cap`, or that expands more than
    MAX_RATIO times, before reading any of it."""
    if info.file_size > cap:
        raise too_large(label, cap, f"{what} ({info.file_size:,} bytes uncompressed)")
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        raise SourceFormatError(
            label, f"{what} expands {info.file_size / max(info.compress_size, 1):,.0f} times "
            f"({info.compress_size:,} -> {info.file_size:,} bytes); refused (at most {MAX_RATIO} times: a zip bomb?)")


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int, label: str, what: str) -> bytes:
    """A zip member's bytes, checked (check_member) before reading and capped while reading."""
    check_member(info, cap, label, what)
    with zf.open(info) as fh:
        return read_capped(fh, cap, label, what)


class CappedStream(io.RawIOBase):
    """A read-only binary stream that raises SourceFormatError once more than `cap` bytes
    have come out of `inner` (a zip member whose header understates its size)."""

    def __init__(self, inner: IO[bytes], cap: int, label: str, what: str):
        self.inner = inner
        self.cap = cap
        self.label = label
        self.what = what
        self.done = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(b))
        n = len(data)
        self.done += n
        if self.done > self.cap:
            raise too_large(self.label, self.cap, self.what)
        b[:n] = data
        return n

    def tell(self) -> int:
        return self.done
