"""Rhythm's own blocks in a calendar: how they are marked, and the block as written.

A plan written into a calendar (``rhythm plan export --ics``, ``rhythm plan push google``)
comes back when the calendar is imported or synced. It must never read as the person's own
time: the planner skips Rhythm's blocks (they are no commitments), and every writer touches
only events that carry Rhythm's marks. The marks, in one place:

- .ics: ``UID`` ``rhythm-<day>-<slot>@rhythm.local`` (stable: re-export updates, never
  duplicates), ``X-RHYTHM-BLOCK:1``, ``CATEGORIES:Rhythm``;
- Google Calendar: the private extended property ``rhythm = "1"`` (with ``rhythm_key`` and
  ``rhythm_day``) decides what Rhythm may change or delete; event ids start with
  ``GOOGLE_ID_PREFIX`` (Google allows only base32hex characters in ids, so no ``@``), which
  is how a synced event, or the UID ``<id>@google.com`` of a Google .ics export, is
  recognised as Rhythm's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

# Blocks Rhythm writes into a calendar carry this at the end of their UID / event id.
RHYTHM_UID_SUFFIX = "@rhythm.local"
# Google Calendar event ids: base32hex (a-v, 0-9), 5-1024 characters. Rhythm's start so.
GOOGLE_ID_PREFIX = "rhmblock"
ICS_MARK = "X-RHYTHM-BLOCK"
ICS_CATEGORY = "Rhythm"
# Google private extended properties (keys at most 44 characters).
GOOGLE_MARK = "rhythm"
GOOGLE_KEY = "rhythm_key"
GOOGLE_DAY = "rhythm_day"
GOOGLE_RECOMMENDATION = "rhythm_recommendation"


def block_key(day: date, slot: str) -> str:
    """The stable name of a day's block in one slot: ``2025-11-19-morning``."""
    return f"{day.isoformat()}-{slot}"


def block_uid(key: str) -> str:
    """The iCalendar UID of a block: ``rhythm-2025-11-19-morning@rhythm.local``."""
    return f"rhythm-{key}{RHYTHM_UID_SUFFIX}"


def is_rhythm_event_id(event_id: str | None) -> bool:
    """True for an event id / UID Rhythm wrote: an .ics block (``...@rhythm.local``), a
    pushed Google event (``rhmblock...``), or that Google event exported as .ics."""
    if not event_id:
        return False
    uid = event_id.split("/", 1)[0]  # the .ics importer names series occurrences UID/RECURRENCE-ID
    return uid.endswith(RHYTHM_UID_SUFFIX) or uid.startswith(GOOGLE_ID_PREFIX)


def is_rhythm_google_event(event: Mapping[str, object]) -> bool:
    """True only for a Google Calendar event that carries Rhythm's private mark. The one
    test before Rhythm changes or deletes anything in a Google calendar: titles, ids and
    shared properties never count."""
    props = event.get("extendedProperties")
    private = props.get("private") if isinstance(props, Mapping) else None
    return isinstance(private, Mapping) and private.get(GOOGLE_MARK) == "1"


@dataclass(frozen=True)
class CalendarBlock:
    """One suggested block as a calendar event (what the writers write)."""

    key: str  # block_key(day, slot)
    day: date  # the plan's local day
    slot: str
    start: datetime  # aware, in the person's zone
    end: datetime
    summary: str  # "Deep work (Rhythm)"
    description: str  # the rationale, the evidence and the expected effect, as text
    planned_at: datetime  # when the plan was made (aware): the event's last change
    busy: bool = False  # TRANSP:OPAQUE / transparency "opaque"; default free
    action: str | None = None
    kind: str | None = None  # block | nap | sleep_in | bedtime | early_night
    recommendation_id: int | None = None

    @property
    def uid(self) -> str:
        return block_uid(self.key)
