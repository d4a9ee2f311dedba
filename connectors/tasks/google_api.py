"""Google Tasks API v1 through google-api-python-client, and Google Takeout's Tasks.json.

``fetch(since, client, zone=...)`` yields, for every task list of the account: the list's raw
payload, each listed task's raw payload (kind ``google_task:<list id>``, key the task id),
a ``task_completed`` sample per completed task (``completions.completion``; ``detail``
``google_tasks:<task id>``, ``device`` ``google_tasks:<list id>``), and a
``Checkpoint(stream=<list id>, cursor=<latest "updated" seen>)``.

- First sync of a list: every task, completed and hidden ones included (``showCompleted``,
  ``showHidden``: tasks ticked off in Google's own apps are hidden once the list is cleared
  and would be missed otherwise), 100 a page, following ``nextPageToken``.
- Later syncs: ``updatedMin`` = the cursor minus ``LAG`` (updates that landed while the last
  sync ran), with ``showDeleted``. A changed task first drops its old sample (its completion
  may have moved, or it may be open again), then adds the new one; a deleted task (``deleted:
  true``) keeps only its raw tombstone. A task list that is gone takes its samples, raw rows and
  cursor with it.
- Completion times are UTC instants (the API keeps no zone): ``local_day`` and
  ``tz_offset_min`` come from ``zone``, the person's configured zone.
- 429, 403 ``rateLimitExceeded`` and 5xx are retried with the project's policy; a 401 is
  refreshed once by google-auth; a 403 for a missing scope is an ``AuthError`` that says what
  to do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from typing import IO, Any

from common.errors import ApiError, AuthError, SourceFormatError
from common.records import Deletion, RawRecord
from connectors import google_http
from connectors.checkpoint import Checkpoint
from connectors.tasks.completions import SOURCE, completion

SYNC = "google_tasks"  # the ApiSync name: sync_state.source
SCOPE = "https://www.googleapis.com/auth/tasks.readonly"
FULL_SCOPE = "https://www.googleapis.com/auth/tasks"  # also lets us read, if granted instead
PAGE_SIZE = 100  # the API's maximum
LAG = timedelta(minutes=10)
LISTS_STREAM = "tasklists"  # the stream a failure is noted on before any list has a cursor
RAW_LIST = "google_tasklist"


def raw_kind(list_id: str) -> str:
    return f"google_task:{list_id}"


def detail_of(task_id: str) -> str:
    return f"{SYNC}:{task_id}"


def device_of(list_id: str) -> str:
    return f"{SYNC}:{list_id}"


# -- the client ---------------------------------------------------------------------------
class GoogleTasksClient(google_http.GoogleClient):
    """tasklists.list and tasks.list with the project's retry policy.

    ``service`` is a googleapiclient Resource (``build_service``). ``on_call`` runs after
    every successful call (used to persist a refreshed access token).
    """

    NAME = SYNC

    def classify(self, exc: BaseException) -> tuple[str, float | None] | None:
        return _classify(exc)

    def raise_mapped(self, exc: BaseException) -> None:
        _raise_mapped(exc)

    def tasklists(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"maxResults": PAGE_SIZE}
            if token:
                kw["pageToken"] = token
            body = self._execute(self.service.tasklists().list(**kw))
            out.extend(i for i in body.get("items") or [] if isinstance(i, dict) and i.get("id"))
            token = body.get("nextPageToken")
            if not token:
                return out

    def task_pages(self, list_id: str, *, updated_min: datetime | None) -> Iterator[dict[str, Any]]:
        """Pages of tasks.list: every task (completed and hidden too); with ``updated_min``,
        only those changed since, deleted ones included."""
        token: str | None = None
        while True:
            kw: dict[str, Any] = {
                "tasklist": list_id,
                "maxResults": PAGE_SIZE,
                "showCompleted": True,
                "showHidden": True,
                "showAssigned": True,
            }
            if updated_min is not None:
                kw["updatedMin"] = rfc3339(updated_min)
                kw["showDeleted"] = True
            if token:
                kw["pageToken"] = token
            body = self._execute(self.service.tasks().list(**kw))
            yield body
            token = body.get("nextPageToken")
            if not token:
                return


def rfc3339(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _reasons(exc: BaseException) -> str:
    """The error's reason words (``rateLimitExceeded``, ``insufficientPermissions``,
    ``ACCESS_TOKEN_SCOPE_INSUFFICIENT`` ...) and message, lower case."""
    parts = []
    for detail in getattr(exc, "error_details", None) or []:
        if isinstance(detail, dict):
            parts.extend(str(detail.get(k, "")) for k in ("reason", "message"))
    try:
        parts.append(str(exc._get_reason()))  # type: ignore[attr-defined]  # HttpError
    except Exception:  # noqa: BLE001 - best effort: the reason is only for the message
        pass
    return " ".join(parts).lower()


def _classify(exc: BaseException) -> tuple[str, float | None] | None:
    return google_http.classify(exc, lambda e: "ratelimitexceeded" in _reasons(e).replace(" ", ""))


def _raise_mapped(exc: BaseException) -> None:
    """Library errors as the project's (never quoting a token)."""
    from google.auth.exceptions import RefreshError
    from googleapiclient.errors import HttpError

    if isinstance(exc, RefreshError):
        raise AuthError(f"{SYNC}: refresh token rejected; run `rhythm auth google` again") from None
    if isinstance(exc, HttpError):
        status = google_http.http_status(exc)
        if status == 403 and ("scope" in _reasons(exc) or "insufficientpermissions" in _reasons(exc)):
            raise AuthError(
                f"{SYNC}: the Google authorisation does not include Google Tasks; set "
                "`google_tasks = true` (rhythm config set google_tasks true) and run "
                "`rhythm auth google` again"
            ) from None
        if status in (401, 403):
            raise AuthError(
                f"{SYNC}: access refused (HTTP {status}); run `rhythm auth google` again"
            ) from None
        raise ApiError(f"{SYNC}: tasks API call failed (HTTP {status})") from None


def build_service(api_base: str, credentials: Any) -> Any:
    """A Tasks v1 Resource pointed at ``api_base`` (a setting: tests use a loopback URL)."""
    return google_http.build_service("tasks", "v1", api_base, credentials)


# -- mapping ------------------------------------------------------------------------------
def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as an aware instant (None when absent or unreadable)."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def _payload(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def forget(task_id: str, list_id: str | None = None) -> Deletion:
    """The sample a task had before it changed (done at another time, re-opened, deleted): in
    any list for a live task (a task moved to another list keeps its id), in ``list_id``
    only for a deleted one (the tombstone a move may leave must not drop the moved task)."""
    where = {"source": SOURCE, "detail": detail_of(task_id)}
    if list_id is not None:
        where["device"] = device_of(list_id)
    return Deletion("samples", where)


def map_task(task: Mapping[str, Any], list_id: str, zone: tzinfo, fetched_at: datetime) -> Iterator[Any]:
    """One tasks.list item -> its raw payload and, completed, its completion sample."""
    tid = str(task.get("id") or "")
    if not tid:
        return
    yield RawRecord(SOURCE, raw_kind(list_id), tid, _payload(task), fetched_at)
    if task.get("deleted") or task.get("status") != "completed":
        return
    done = parse_time(task.get("completed"))
    if done is None:
        return  # completed without a completion time: nothing to place
    yield completion(done.astimezone(zone), detail=detail_of(tid), device=device_of(list_id))


# -- fetching -----------------------------------------------------------------------------
def fetch_list(
    tasklist: Mapping[str, Any],
    cursor: str | None,
    client: GoogleTasksClient,
    *,
    zone: tzinfo,
    fetched_at: datetime,
) -> Iterator[Any]:
    lid = str(tasklist["id"])
    since = parse_time(cursor)
    latest = since
    for page in client.task_pages(lid, updated_min=since - LAG if since else None):
        tasks = [t for t in page.get("items") or [] if isinstance(t, dict) and t.get("id")]
        stamps = [parse_time(t.get("updated")) for t in tasks]
        if since is not None:  # changed since the last sync (not a repeat from the lag window)
            for task, updated in zip(tasks, stamps, strict=True):
                if updated is None or updated > since:
                    # a page's deletions first: one writer flush a page
                    yield forget(str(task["id"]), lid if task.get("deleted") else None)
        for task in tasks:
            yield from map_task(task, lid, zone, fetched_at)
        for updated in stamps:
            if updated is not None and (latest is None or updated > latest):
                latest = updated
    yield Checkpoint(SYNC, lid, rfc3339(latest) if latest is not None else None)


def fetch(
    since: Mapping[str, str | None],
    client: GoogleTasksClient,
    *,
    zone: tzinfo,
    now: datetime | None = None,
) -> Iterator[Any]:
    """Every task list; ``since`` maps list id -> the latest ``updated`` of the last sync."""
    fetched_at = now or datetime.now(UTC)
    lists = client.tasklists()
    for tl in lists:
        yield RawRecord(SOURCE, RAW_LIST, str(tl["id"]), _payload(tl), fetched_at)
    for tl in lists:
        yield from fetch_list(tl, since.get(str(tl["id"])), client, zone=zone, fetched_at=fetched_at)
    current = {str(tl["id"]) for tl in lists}
    for lid in sorted(set(since) - current - {LISTS_STREAM}):  # a list deleted since the last sync
        yield Deletion("samples", {"source": SOURCE, "device": device_of(lid)})
        yield Deletion(f"raw_{SOURCE}", {"kind": raw_kind(lid)})
        yield Deletion(f"raw_{SOURCE}", {"kind": RAW_LIST, "natural_key": lid})
        yield Deletion("sync_state", {"source": SYNC, "stream": lid})


# -- Google Takeout -----------------------------------------------------------------------
def read_takeout(fh: IO[bytes], name: str, zone: tzinfo, fetched_at: datetime) -> Iterator[Any]:
    """Google Takeout's ``Tasks/Tasks.json`` (``{"items": [task list {"id", "items": [task]}]}``,
    the API's shapes): the same raw rows and samples as a first sync, so a Takeout import and
    a later sync of the same account meet on the same keys."""
    try:
        doc = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SourceFormatError(name, f"not JSON: {exc}") from None
    except RecursionError:
        raise SourceFormatError(name, "JSON nested too deeply; refused") from None
    lists = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(lists, list) or not all(isinstance(t, dict) for t in lists):
        raise SourceFormatError(
            name, 'not a Google Takeout Tasks.json (expected {"items": [task lists with their "items"]})')
    for i, tl in enumerate(lists):
        lid = tl.get("id")
        tasks = tl.get("items") or []
        if not isinstance(lid, str) or not lid or not isinstance(tasks, list):
            raise SourceFormatError(name, "a task list without an id (text) or a list of tasks", f"list {i + 1}")
        yield RawRecord(SOURCE, RAW_LIST, lid, _payload({k: v for k, v in tl.items() if k != "items"}),
                        fetched_at)
        for j, task in enumerate(tasks):
            _check_takeout_task(task, name, f"list {i + 1}, task {j + 1}")
            yield from map_task(task, lid, zone, fetched_at)


def _check_takeout_task(task: Any, name: str, where: str) -> None:
    """A Takeout task of the API's shape, or one line saying what is wrong and where."""
    from common.timeutil import in_sane_range, out_of_range_detail

    def kind(v: Any) -> str:
        return {dict: "an object", list: "a list", str: "text", bool: "true/false"}.get(type(v), type(v).__name__)

    if not isinstance(task, dict):
        raise SourceFormatError(name, f"a task is {kind(task)}, expected an object", where)
    for key in ("id", "title", "status", "completed", "updated", "notes", "due"):
        v = task.get(key)
        if v is not None and not isinstance(v, str):
            raise SourceFormatError(name, f"{key}: expected text, got {kind(v)}", where)
    if task.get("status") == "completed" and task.get("completed"):
        when = parse_time(task["completed"])
        if when is None:
            raise SourceFormatError(name, f"completed: not an RFC 3339 time: {task['completed'][:40]!r}", where)
        if not in_sane_range(when):
            raise SourceFormatError(name, "completed: " + out_of_range_detail("time", task["completed"][:40]), where)
