"""A tiny FIT encoder for tests: enough of the protocol to write valid files (header, one
definition per message kind, little-endian data messages, both CRCs) and damaged ones.

    fit_file([file_id(), *(record(ts, 60 + i) for i, ts in enumerate(times))])

Timestamps are FIT seconds (since 1989-12-31 UTC); `fit_seconds(datetime)` converts.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import UTC, datetime

from fitdecode.utils import compute_crc

FIT_EPOCH = datetime(1989, 12, 31, tzinfo=UTC)
# base types: (code, struct format)
UINT8, UINT16, UINT32, UINT32Z, ENUM = (0x02, "B"), (0x84, "H"), (0x86, "I"), (0x8C, "I"), (0x00, "B")


@dataclass(frozen=True)
class Message:
    global_num: int
    fields: tuple[tuple[int, tuple[int, str], int], ...]  # (field number, base type, value)


def fit_seconds(ts: datetime) -> int:
    return int((ts - FIT_EPOCH).total_seconds())


def file_id(serial: int = 3_900_000_001, created: int = 1_000_000_000) -> Message:
    # type 4 = activity, manufacturer 1 = garmin, product 1 (hrm1)
    return Message(0, ((0, ENUM, 4), (1, UINT16, 1), (2, UINT16, 1), (3, UINT32Z, serial), (4, UINT32, created)))


def record(ts: int, heart_rate: int) -> Message:
    return Message(20, ((253, UINT32, ts), (3, UINT8, heart_rate)))


def session(start: int, end: int, sport: int = 1) -> Message:
    # start_time (2), timestamp (253), total_elapsed_time (7, s*1000), total_timer_time (8), sport (5)
    ms = max(end - start, 0) * 1000
    return Message(18, ((253, UINT32, end), (2, UINT32, start), (7, UINT32, ms), (8, UINT32, ms), (5, ENUM, sport)))


def fit_file(messages: list[Message], *, truncate: int | None = None) -> bytes:
    body = bytearray()
    local: dict[tuple, int] = {}
    for m in messages:
        shape = (m.global_num, tuple((f, t) for f, t, _ in m.fields))
        if shape not in local:
            local[shape] = n = len(local) % 16
            body += bytes([0x40 | n, 0, 0]) + struct.pack("<HB", m.global_num, len(m.fields))
            for f, (code, fmt), _ in m.fields:
                body += bytes([f, struct.calcsize(fmt), code])
        body += bytes([local[shape]])
        for _, (_, fmt), value in m.fields:
            body += struct.pack("<" + fmt, value)
    header = struct.pack("<BBHI4s", 14, 0x10, 2093, len(body), b".FIT")
    header += struct.pack("<H", compute_crc(header))
    data = header + bytes(body)
    data += struct.pack("<H", compute_crc(data))
    return data[:truncate] if truncate is not None else data
