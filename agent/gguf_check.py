"""Is this GGUF whole? A check before a model file is used or installed (issue 41).

``check_model_file`` reads the header (magic, version, metadata, tensor table) with bounds on
every count and length, checks the file holds every tensor's bytes (a truncated ``--base``
or a half-copied file is refused), and probes the data: a tensor whose sampled bytes are all
zero counts as blank, and a model with more blank tensors than ``MAX_BLANK_SHARE`` (or, given
the model it was refined from, a different tensor table or more blank tensors than that one)
is refused. Pure Python, a few KB read: cheap enough before every use.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from agent.runtime import GGUF_MAGIC, check_gguf
from common.errors import ModelError

MAX_COUNT = 1_000_000  # tensors, metadata entries, array items
MAX_STRING = 16 << 20
MAX_BLANK_SHARE = 0.1  # at most this share of tensors may be all zeros
PROBE_BYTES = 256
# ggml type -> (elements per block, bytes per block)
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
          10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
          24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2)}
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the data section

    @property
    def nbytes(self) -> int | None:
        if self.ggml_type not in BLOCKS:
            return None
        per, size = BLOCKS[self.ggml_type]
        n = 1
        for d in self.shape:
            n *= d
        return -(-n // per) * size


@dataclass(frozen=True)
class GgufInfo:
    version: int
    metadata: dict[str, Any]
    tensors: list[Tensor]
    data_start: int
    size: int
    blank: int  # tensors whose probed bytes are all zero


class _Short(Exception):
    pass


def _read(fh: IO[bytes], n: int) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise _Short
    return data


def _unpack(fh: IO[bytes], fmt: str) -> Any:
    return struct.unpack(fmt, _read(fh, struct.calcsize(fmt)))[0]


def _string(fh: IO[bytes]) -> str:
    n = _unpack(fh, "<Q")
    if n > MAX_STRING:
        raise ValueError(f"a string of {n:,} bytes")
    return _read(fh, n).decode("utf-8", "replace")


def _value(fh: IO[bytes], vtype: int) -> Any:
    if vtype in _SCALARS:
        return _unpack(fh, _SCALARS[vtype])
    if vtype == 8:
        return _string(fh)
    if vtype == 9:
        itype, n = _unpack(fh, "<I"), _unpack(fh, "<Q")
        if n > MAX_COUNT * 10:
            raise ValueError(f"an array of {n:,} items")
        items = [_value(fh, itype) for _ in range(n)]
        return items if n <= 64 else f"<{n} items>"
    raise ValueError(f"unknown metadata type {vtype}")


def read_info(path: Path) -> GgufInfo:
    """The header, tensor table and blank-tensor probe of a GGUF; ModelError if damaged."""
    size = path.stat().st_size
    try:
        with path.open("rb") as fh:
            if _read(fh, 4) != GGUF_MAGIC:
                raise ModelError(f"not a GGUF file: {path}")
            version = _unpack(fh, "<I")
            if version not in (2, 3):
                raise ModelError(f"{path}: GGUF version {version} is not one Rhythm reads (2 or 3)")
            n_tensors, n_kv = _unpack(fh, "<Q"), _unpack(fh, "<Q")
            if n_tensors > MAX_COUNT or n_kv > MAX_COUNT:
                raise ModelError(f"{path}: damaged GGUF header ({n_tensors:,} tensors, {n_kv:,} metadata entries)")
            meta = {}
            for _ in range(n_kv):
                key = _string(fh)
                meta[key] = _value(fh, _unpack(fh, "<I"))
            tensors = []
            for _ in range(n_tensors):
                name = _string(fh)
                dims = _unpack(fh, "<I")
                if dims > 8:
                    raise ValueError(f"tensor {name!r} with {dims} dimensions")
                shape = tuple(_unpack(fh, "<Q") for _ in range(dims))
                tensors.append(Tensor(name, shape, _unpack(fh, "<I"), _unpack(fh, "<Q")))
            align = int(meta.get("general.alignment", 32) or 32)
            start = -(-fh.tell() // align) * align
            needed = max((start + t.offset + (t.nbytes or 0) for t in tensors), default=start)
            if needed > size:
                raise ModelError(f"{path}: truncated GGUF: its tensors need {needed:,} bytes, the file has {size:,}")
            blank = sum(_blank(fh, start, t) for t in tensors)
    except _Short:
        raise ModelError(f"{path}: truncated GGUF (the header ends early, {size:,} bytes)") from None
    except (ValueError, UnicodeError, struct.error) as exc:
        raise ModelError(f"{path}: damaged GGUF header ({exc})") from None
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    return GgufInfo(version, meta, tensors, start, size, blank)


def _blank(fh: IO[bytes], start: int, t: Tensor) -> bool:
    """Whether the tensor's bytes at its start, middle and end are all zero (tensors under
    1 KiB are not probed: a small bias may well be zero)."""
    n = t.nbytes
    if n is None or n < 1024:
        return False
    for at in (0, n // 2, n - PROBE_BYTES):
        fh.seek(start + t.offset + at)
        if any(fh.read(PROBE_BYTES)):
            return False
    return True


def check_model_file(path: str | Path, like: str | Path | None = None) -> GgufInfo:
    """``path``'s GGUF info if the file is whole (module docstring); else ModelError, one line.
    ``like``: the model it was made from, whose tensor table it must share."""
    p = check_gguf(path)  # there, a file, the magic
    info = read_info(p)
    if not info.tensors:
        raise ModelError(f"{p}: a GGUF without tensors")
    allowed = int(MAX_BLANK_SHARE * len(info.tensors))
    if like is not None:
        base = read_info(Path(like).expanduser())
        ours = sorted((t.name, t.shape) for t in info.tensors)
        if ours != sorted((t.name, t.shape) for t in base.tensors):
            raise ModelError(f"{p}: its tensors differ from {Path(like).name}'s (names or shapes): not a model "
                             "refined from it")
        allowed = base.blank
    if info.blank > allowed:
        raise ModelError(f"{p}: {info.blank} of {len(info.tensors)} tensors are all zeros: a damaged model; refused")
    return info
