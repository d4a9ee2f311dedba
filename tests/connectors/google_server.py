"""The loopback Google Calendar server (lab.google_calendar) as the tests use it: holding the
recorded gcalvault calendar list in tests/fixtures."""

from __future__ import annotations

import json
from typing import Any

from lab import google_calendar
from lab.google_calendar import CALENDAR, EVENTS, READONLY, all_day, now_utc, timed  # noqa: F401 (the tests' names)
from lab.loopback import Loopback
from tests.fixtures import FIXTURES

CALENDAR_LIST = FIXTURES / "google_calendar" / "api_json" / "gcalvault_cal_list.json"


def calendar_list() -> dict[str, Any]:
    return json.loads(CALENDAR_LIST.read_text())


class GoogleServer(google_calendar.GoogleServer):
    def __init__(self, srv: Loopback, calendars: dict[str, Any] | None = None):
        super().__init__(srv, calendars if calendars is not None else calendar_list())
