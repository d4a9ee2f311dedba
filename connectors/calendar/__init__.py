"""Calendars: ``.ics`` files (``read_export``, recurring series expanded) and the Google
Calendar API v3 sync."""

from typing import Any

from connectors.registry import ApiSync, FileImport

SOURCES = (
    FileImport(
        name="ics",
        label="Calendar",
        reader="connectors.calendar.ics:read_export",
        help="Calendar .ics file; recurring events expanded inside the configured window.",
        path_help="A calendar .ics file (or a folder of them).",
        record_source="calendar",
        options={"window_past_days": "ics_window_past_days", "window_future_days": "ics_window_future_days",
                 "owner_emails": "calendar_owner_emails"},
        data_window=True,
    ),
    ApiSync(
        name="google",
        label="Google Calendar",
        opener="connectors.calendar.google_sync:open_sync",
        authorised="connectors.calendar.google_sync:authorised",
        default_stream="calendarList",
        record_source="calendar",
    ),
)


def __getattr__(name: str) -> Any:
    if name == "read_export":
        from connectors.calendar.ics import read_export

        return read_export
    raise AttributeError(name)


__all__ = ["SOURCES", "read_export"]
