"""Google Calendar API v3 through google-api-python-client (connectors.md A4).

`fetch(since, client, window_start=...)` yields, for every selected calendar of the
user's calendarList: `Event`s (source "google"), `Deletion`s, raw payloads, and a
`Checkpoint(source="google", stream=<calendar id>, cursor=<nextSyncToken>)`.

- First sync of a calendar: `singleEvents=true` (recurring series expanded into instances)
  from `timeMin = window_start`, page by page with `pageToken`.
- Later syncs: `syncToken` only (no timeMin: the API refuses the combination); changed
  events come back, deleted ones as `status: "cancelled"` -> `Deletion` of that row (and
  of the instances of a cancelled series).
- `nextSyncToken` arrives on the last page only; the cursor is that token, so a sync that
  stops halfway stores nothing.
- 410 Gone (the token expired): `Deletion` of every row of that calendar, then a full sync.
- All-day events: `start.date`/`end.date` (end exclusive) at midnight in the calendar's time
  zone, `all_day=True`, `local_day` = start date. Timed events: `local_day` in the event's
  own time zone (`start.timeZone`, else the calendar's).

Raw payloads land in `raw_calendar` with kind `google_event:<calendar id>` so that a 410
wipe can drop them with the rows. The .ics connector uses source "calendar"; API events use
"google", so the two never overwrite each other.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from common.errors import ApiError, AuthError
from common.records import Deletion, Event, RawRecord, Skipped
from common.timeutil import in_sane_range
from connectors import google_http
from connectors.checkpoint import Checkpoint
from connectors.screen import OUT_OF_RANGE, READ_ERRORS, screen

SOURCE = "google"
RAW_SOURCE = "calendar"
SCOPES = ("https://www.googleapis.com/auth/calendar.readonly",)
PAGE_SIZE = 250
UNREADABLE = "unreadable record"


class SyncTokenExpired(Exception):
    """The server answered 410 Gone to a syncToken: full re-sync needed."""


# -- the client ---------------------------------------------------------------------------
class GoogleCalendarClient(google_http.GoogleClient):
    """calendarList and events.list with the project's retry policy.

    `service` is a googleapiclient Resource (`build_service`); tests may hand in any object
    with the same `calendarList().list(...).execute()` / `events().list(...).execute()`.
    `on_call` runs after every successful call (used to persist a refreshed access token).
    """

    NAME = "google"

    def classify(self, exc: BaseException) -> tuple[str, float | None] | None:
        return _classify(exc)

    def raise_mapped(self, exc: BaseException) -> None:
        _raise_mapped(exc)

    def calendars(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"maxResults": 250}
            if token:
                kw["pageToken"] = token
            body = self._execute(self.service.calendarList().list(**kw))
            out.extend(i for i in body.get("items") or [] if isinstance(i, dict))
            token = body.get("nextPageToken")
            if not token:
                return out

    def event_pages(
        self, calendar_id: str, *, sync_token: str | None, time_min: datetime | None
    ) -> Iterator[dict[str, Any]]:
        """Pages of events.list; raises SyncTokenExpired on 410."""
        page_token: str | None = None
        while True:
            kw: dict[str, Any] = {
                "calendarId": calendar_id,
                "singleEvents": True,
                "maxResults": PAGE_SIZE,
            }
            if sync_token:
                kw["syncToken"] = sync_token
            elif time_min is not None:
                kw["timeMin"] = time_min.astimezone(UTC).isoformat().replace("+00:00", "Z")
            if page_token:
                kw["pageToken"] = page_token
            body = self._execute(self.service.events().list(**kw))
            yield body
            page_token = body.get("nextPageToken")
            if not page_token:
                return


def _rate_limited(exc: BaseException) -> bool:
    try:
        reason = str(exc._get_reason())  # type: ignore[attr-defined]  # HttpError
    except Exception:
        return False
    return "rate limit" in reason.lower()


def _classify(exc: BaseException) -> tuple[str, float | None] | None:
    return google_http.classify(exc, _rate_limited)


def _raise_mapped(exc: BaseException) -> None:
    """Turn library errors into the project's hierarchy (never quoting a token)."""
    from google.auth.exceptions import RefreshError
    from googleapiclient.errors import HttpError

    if isinstance(exc, RefreshError):
        raise AuthError("google: refresh token rejected; run `rhythm auth google` again") from None
    if isinstance(exc, HttpError):
        status = google_http.http_status(exc)
        if status == 410:
            raise SyncTokenExpired() from None
        if status in (401, 403):
            raise AuthError(
                f"google: access refused (HTTP {status}); run `rhythm auth google` again"
            ) from None
        raise ApiError(f"google: calendar API call failed (HTTP {status})") from None


def build_service(api_base: str, credentials: Any) -> Any:
    """A Calendar v3 Resource pointed at `api_base` (a setting: tests use a loopback URL)."""
    return google_http.build_service("calendar", "v3", api_base, credentials)


# -- mapping ------------------------------------------------------------------------------
def _zone(name: str | None) -> ZoneInfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _parse_dt(value: str) -> datetime | None:
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else None


def _when(
    part: Mapping[str, Any] | None, cal_tz: ZoneInfo | None
) -> tuple[datetime, bool, str | None] | None:
    """(aware instant, all_day, zone name) of an event's start or end."""
    if not isinstance(part, dict):
        return None
    zone_name = part.get("timeZone")
    if part.get("dateTime"):
        dt = _parse_dt(str(part["dateTime"]))
        if dt is None:
            zone = _zone(zone_name) or cal_tz
            try:
                naive = datetime.fromisoformat(str(part["dateTime"]))
            except ValueError:
                return None
            if zone is None:
                return None
            dt = naive.replace(tzinfo=zone)
        return dt, False, zone_name
    if part.get("date"):
        try:
            d = date.fromisoformat(str(part["date"]))
        except ValueError:
            return None
        zone = cal_tz or UTC
        return datetime.combine(d, time(0), tzinfo=zone), True, zone_name
    return None


def _attendees(ev: Mapping[str, Any]) -> tuple[int | None, str | None]:
    people = ev.get("attendees")
    if not isinstance(people, list):
        return None, None
    others = 0
    mine = None
    for a in people:
        if not isinstance(a, dict) or a.get("resource"):
            continue  # rooms and equipment are not people
        if a.get("self"):
            mine = a.get("responseStatus")
        else:
            others += 1
    return others, mine


def map_event(
    ev: Mapping[str, Any], calendar_id: str, cal_tz_name: str | None, fetched_at: datetime
) -> Iterator[Any]:
    """One events.list item -> raw + Event, or Deletions for a cancelled one."""
    eid = str(ev.get("id") or "")
    if not eid:
        return
    raw_kind = f"google_event:{calendar_id}"
    if ev.get("status") == "cancelled":
        yield Deletion("events", {"source": SOURCE, "calendar_id": calendar_id, "event_id": eid})
        if not ev.get("recurringEventId"):  # a whole series: its expanded instances go too
            yield Deletion(
                "events",
                {"source": SOURCE, "calendar_id": calendar_id, "recurring_event_id": eid},
            )
        yield Deletion("raw_calendar", {"kind": raw_kind, "natural_key": eid})
        return
    cal_tz = _zone(cal_tz_name)
    start = _when(ev.get("start"), cal_tz)
    end = _when(ev.get("end"), cal_tz)
    if start is None:  # no start, or one that is not a date: nothing to place in time
        yield Skipped(SOURCE, UNREADABLE)
        return
    start_ts, all_day, zone_name = start
    end_ts = end[0] if end is not None else start_ts  # end < start: screened and counted
    if not (in_sane_range(start_ts) and in_sane_range(end_ts)):
        yield Skipped(SOURCE, OUT_OF_RANGE)
        return
    event_zone = _zone(zone_name) or cal_tz
    if all_day:
        local_day = date.fromisoformat(str(ev["start"]["date"]))
    else:
        local_day = start_ts.astimezone(event_zone).date() if event_zone else start_ts.date()
    others, mine = _attendees(ev)
    updated = _parse_dt(str(ev["updated"])) if ev.get("updated") else None
    yield RawRecord(
        source=RAW_SOURCE,
        kind=raw_kind,
        natural_key=eid,
        payload=json.dumps(ev, separators=(",", ":"), sort_keys=True, ensure_ascii=False),
        fetched_at=fetched_at,
    )
    yield Event(
        source=SOURCE,
        calendar_id=calendar_id,
        event_id=eid,
        start_ts=start_ts.astimezone(UTC),
        end_ts=end_ts.astimezone(UTC),
        all_day=all_day,
        local_day=local_day,
        title=ev.get("summary"),
        description=ev.get("description"),
        location=ev.get("location"),
        status=str(ev.get("status") or "confirmed"),
        attendees_count=others,
        self_response=mine,
        event_type=ev.get("eventType"),
        transparency=ev.get("transparency"),
        timezone=zone_name or cal_tz_name,
        recurring_event_id=ev.get("recurringEventId"),
        updated_at=updated.astimezone(UTC) if updated else None,
    )


def selected(calendars: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calendars the person shows in Google Calendar (`selected`), primary always."""
    return [
        c
        for c in calendars
        if c.get("id") and not c.get("deleted") and (c.get("selected") or c.get("primary"))
    ]


# -- fetching -----------------------------------------------------------------------------
def fetch_calendar(
    calendar: Mapping[str, Any],
    sync_token: str | None,
    client: GoogleCalendarClient,
    *,
    window_start: datetime,
    fetched_at: datetime,
) -> Iterator[Any]:
    cid = str(calendar["id"])
    tz_name = calendar.get("timeZone")
    try:
        yield from _pages(cid, tz_name, sync_token, client, window_start, fetched_at)
    except SyncTokenExpired:
        if not sync_token:
            raise ApiError(f"google: calendar {cid} answered 410 to a full sync") from None
        # The token is stale: forget this calendar's rows and list it again from scratch.
        yield Deletion("events", {"source": SOURCE, "calendar_id": cid})
        yield Deletion("raw_calendar", {"kind": f"google_event:{cid}"})
        try:
            yield from _pages(cid, tz_name, None, client, window_start, fetched_at)
        except SyncTokenExpired:
            raise ApiError(f"google: calendar {cid} answered 410 to a full sync") from None


def _pages(
    cid: str,
    tz_name: str | None,
    sync_token: str | None,
    client: GoogleCalendarClient,
    window_start: datetime,
    fetched_at: datetime,
) -> Iterator[Any]:
    next_sync: str | None = None
    for page in client.event_pages(cid, sync_token=sync_token, time_min=window_start):
        tz_name = page.get("timeZone") or tz_name
        for ev in page.get("items") or []:
            if isinstance(ev, dict):
                yield from _mapped(ev, cid, tz_name, fetched_at)
        next_sync = page.get("nextSyncToken") or next_sync
    yield Checkpoint(SOURCE, cid, next_sync)


def _mapped(ev: Mapping[str, Any], cid: str, tz_name: str | None, fetched_at: datetime) -> Iterator[Any]:
    """One event's rows; an event that cannot be mapped (a field of the wrong type, a date
    past year 9999) is left out and counted: Google would send it again on every sync."""
    try:
        out = list(map_event(ev, cid, tz_name, fetched_at))
    except READ_ERRORS:
        yield Skipped(SOURCE, UNREADABLE)
        return
    yield from out


def fetch(
    since: Mapping[str, str | None],
    client: GoogleCalendarClient,
    *,
    window_start: datetime,
    now: datetime | None = None,
) -> Iterator[Any]:
    """Every selected calendar; `since` maps calendar id -> stored syncToken. Events dated
    outside the sane range, or ending before they start, are left out and counted."""
    fetched_at = now or datetime.now(UTC)

    def records() -> Iterator[Any]:
        for cal in selected(client.calendars()):
            yield from fetch_calendar(
                cal,
                since.get(str(cal["id"])),
                client,
                window_start=window_start,
                fetched_at=fetched_at,
            )

    yield from screen(records(), SOURCE, refuse=False)


def window_start_for(now: datetime, past_days: int) -> datetime:
    return (now - timedelta(days=past_days)).replace(microsecond=0)
