"""Calendars: ``.ics`` files (``read_export``), recurring series expanded."""

from connectors.calendar.ics import read_export

__all__ = ["read_export"]
