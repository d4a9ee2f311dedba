"""The one non-record item an API connector yields: "everything up to here is out"."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Yielded after the last record of a stream (after its last page).

    The sync stores `cursor` in `sync_state(source, stream)` in the same transaction as the
    records yielded before it, so a cursor never runs ahead of the data. `cursor=None` means
    "no new position" (nothing came back): the stored cursor stays as it is.
    """

    source: str
    stream: str
    cursor: str | None
