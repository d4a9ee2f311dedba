"""Google Tasks v1 (`rhythm sync google_tasks`, `rhythm auth google` with the tasks scope)
against a loopback server speaking the v1 protocol (tests/connectors/tasks_server.py), through
the real googleapiclient, google-auth, the job runner and DuckDB."""

from __future__ import annotations

import io
import json
import threading
import time
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest

from connectors.http import RetryPolicy
from connectors.oauth import FileTokenStore
from rhythm import sync as sync_mod
from rhythm.jobs import sync
from rhythm.settings import load_settings
from storage import open_db
from tests.connectors.tasks_server import CALENDAR, PAGE, READ, TasksServer, stamp
from tests.loopback import Loopback, Reply

TOKYO = ZoneInfo("Asia/Tokyo")
T0 = datetime(2026, 4, 20, 0, 30, tzinfo=UTC)  # 09:30 in Tokyo


@pytest.fixture
def server():
    with Loopback() as srv:
        yield TasksServer(srv)


@pytest.fixture
def waits(monkeypatch):
    recorded: list[float] = []
    monkeypatch.setattr(sync_mod, "default_policy", lambda: RetryPolicy(max_retries=3, sleep=recorded.append, jitter=False))
    return recorded


@pytest.fixture
def env(rhythm_home, server, monkeypatch, waits):
    for k, v in {
        "RHYTHM_GOOGLE_TASKS_API_BASE": server.api_base,
        "RHYTHM_GOOGLE_TOKEN_URL": server.token_url,
        "RHYTHM_GOOGLE_AUTH_URL": server.auth_url,
        "RHYTHM_GOOGLE_CLIENT_ID": "gid",
        "RHYTHM_GOOGLE_CLIENT_SECRET": "gsecret",
        "RHYTHM_GOOGLE_TASKS": "true",
        "RHYTHM_TIMEZONE": "Asia/Tokyo",
    }.items():
        monkeypatch.setenv(k, v)
    return load_settings()


def seed_token(settings, server: TasksServer, access: str = "t-acc-0", scope: str | None = None) -> None:
    FileTokenStore(settings.tokens_dir).save("google", {
        "access_token": access, "refresh_token": server.refresh_token, "expires_at": time.time() + 3000,
        "scope": scope if scope is not None else " ".join(sorted(server.granted)),
    })


def q(settings, sql: str, params=None) -> list[tuple]:
    with open_db(settings.database, read_only=True) as db:
        return db.query(sql, params)[1]


def completions(settings) -> dict[str, tuple]:
    """task id -> (completion instant, local day, offset, list device) of every task sample."""
    rows = q(settings, "SELECT detail, start_ts, end_ts, value, local_day, tz_offset_min, device FROM samples "
                       "WHERE source = 'tasks' AND metric = 'task_completed'")
    out = {}
    for detail, start, end, value, day, off, device in rows:
        assert start == end and value == 1.0
        out[detail.split(":", 1)[1]] = (start, day, off, device.split(":", 1)[1])
    return out


def cursors(settings) -> dict[str, str | None]:
    return dict(q(settings, "SELECT stream, cursor FROM sync_state WHERE source = 'google_tasks'"))


def two_lists(server: TasksServer) -> None:
    server.add_list("L1", "Work")
    server.add_list("L2", "Home")
    for i in range(7):  # more than two pages of PAGE
        server.put("L1", f"w{i}", f"work thing {i}", completed=T0 + timedelta(hours=5 * i))
    server.put("L1", "open1", "still to do")
    server.put("L2", "h1", "water the plants", completed=T0 + timedelta(minutes=14 * 60 + 15))  # 23:45 Tokyo
    server.put("L2", "h2", "old errand", completed=T0 - timedelta(days=3))
    server.clear("L2")  # Google's apps hide ticked-off tasks once the list is cleared


def test_first_sync_pages_every_list_and_counts_hidden_completed_tasks(env, server, run_cli):
    two_lists(server)
    seed_token(env, server)
    code, out, err = run_cli("sync", "google_tasks", "--json")
    assert code == 0, err
    assert json.loads(out)["sources"]["google_tasks"]["ok"]
    got = completions(env)
    assert set(got) == {f"w{i}" for i in range(7)} | {"h1", "h2"}  # not the open one
    assert got["w0"] == (T0, date(2026, 4, 20), 540, "L1")
    assert got["h1"][1] == date(2026, 4, 20) and got["h1"][2] == 540  # 23:45 in Tokyo, the same day
    assert got["w3"][1] == date(2026, 4, 21)  # 00:30 UTC + 15 h = 00:30 the next day in Tokyo
    calls = server.srv.calls("GET", "/tasks/v1/lists/L1/tasks")
    assert [c.query.get("pageToken") for c in calls] == [None, str(PAGE), str(2 * PAGE)]
    assert all(c.query["showHidden"] == "true" and c.query["showCompleted"] == "true"
               and c.query["maxResults"] == "100" and "updatedMin" not in c.query for c in calls)
    # the cursor of each list is the latest `updated` it listed
    assert cursors(env) == {"L1": server.tasks["L1"]["open1"]["updated"],
                            "L2": max(t["updated"] for t in server.tasks["L2"].values())}
    # raw payloads keep the titles; samples never do
    assert q(env, "SELECT payload->>'title' FROM raw_tasks WHERE natural_key = 'h1'") == [("water the plants",)]
    assert q(env, "SELECT count(*) FROM raw_tasks WHERE kind = 'google_tasklist'") == [(2,)]
    text = " ".join(str(v) for row in q(env, "SELECT * FROM samples") for v in row)
    assert "plants" not in text and "work thing" not in text and "Home" not in text


def test_incremental_sync_follows_changes_deletions_and_reopened_tasks(env, server):
    two_lists(server)
    seed_token(env, server)
    assert sync(env, ["google_tasks"])["ok"]
    first = cursors(env)
    server.put("L1", "open1", "still to do", completed=T0 + timedelta(days=2))  # ticked off now
    server.put("L1", "w1", "work thing 1")  # re-opened: its completion no longer counts
    server.put("L1", "w2", "work thing 2", completed=T0 + timedelta(days=3))  # ticked off again, later
    server.delete("L1", "w4")
    server.put("L2", "h3", "new", completed=T0 + timedelta(days=1))
    result = sync(env, ["google_tasks"])
    assert result["ok"], result
    got = completions(env)
    assert set(got) == {"w0", "w2", "w3", "w5", "w6", "open1", "h1", "h2", "h3"}
    assert got["w2"][0] == T0 + timedelta(days=3)
    assert q(env, "SELECT count(*) FROM samples WHERE metric = 'task_completed'") == [(9,)]
    # the second listing asked only for changes since the cursor (minus the lag), deleted ones too
    last = server.srv.calls("GET", "/tasks/v1/lists/L1/tasks")[-1]
    since = datetime.fromisoformat(first["L1"].replace("Z", "+00:00"))
    assert last.query["updatedMin"] == stamp(since - timedelta(minutes=10))
    assert last.query["showDeleted"] == "true"
    assert json.loads(q(env, "SELECT payload FROM raw_tasks WHERE natural_key = 'w4'")[0][0])["deleted"] is True
    assert cursors(env)["L1"] == server.tasks["L1"]["w4"]["updated"]
    # a third sync with nothing new changes nothing (the lag window repeats, idempotently)
    before = q(env, "SELECT * FROM samples ORDER BY ALL")
    third = sync(env, ["google_tasks"])["sources"]["google_tasks"]
    assert q(env, "SELECT * FROM samples ORDER BY ALL") == before
    assert third["tables"].get("samples", {}).get("deleted", 0) == 0


def test_a_deleted_list_takes_its_tasks_and_cursor_with_it(env, server):
    two_lists(server)
    seed_token(env, server)
    assert sync(env, ["google_tasks"])["ok"]
    server.drop_list("L2")
    assert sync(env, ["google_tasks"])["ok"]
    assert {v[3] for v in completions(env).values()} == {"L1"}
    assert q(env, "SELECT count(*) FROM raw_tasks WHERE kind = 'google_task:L2' OR natural_key = 'L2'") == [(0,)]
    assert set(cursors(env)) == {"L1"}


@pytest.mark.parametrize("tombstone_first", [True, False])
def test_a_task_moved_to_another_list_counts_once(env, server, tombstone_first):
    for lid in ("A", "B") if tombstone_first else ("B", "A"):  # synced in the order the API lists them
        server.add_list(lid, lid)
    server.put("A", "m", "moving task", completed=T0)
    seed_token(env, server)
    assert sync(env, ["google_tasks"])["ok"]
    server.tasks["B"]["m"] = {**server.tasks["A"]["m"], "updated": server.tick()}
    server.delete("A", "m")
    assert sync(env, ["google_tasks"])["ok"]
    assert completions(env) == {"m": (T0, date(2026, 4, 20), 540, "B")}


def test_429_and_5xx_are_retried_and_a_storm_leaves_nothing(env, server, waits, run_cli):
    two_lists(server)
    seed_token(env, server)
    server.faults["/lists/L1/tasks"] = [Reply(503), Reply(429, headers={"Retry-After": "7"})]
    assert sync(env, ["google_tasks"])["ok"]
    assert waits[1] == 7.0 and len(waits) == 2
    snapshot = q(env, "SELECT * FROM samples ORDER BY ALL")
    cursor_before = cursors(env)
    server.put("L1", "late", "late one", completed=T0 + timedelta(days=5))
    server.faults["/lists/L2/tasks"] = [Reply(500)] * 10
    code, _, err = run_cli("sync", "google_tasks")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "after 3 retries" in err
    assert q(env, "SELECT * FROM samples ORDER BY ALL") == snapshot  # L1's new task rolled back too
    assert {k: v for k, v in cursors(env).items() if k != "tasklists"} == cursor_before
    assert q(env, "SELECT count(*) FROM sync_state WHERE source = 'google_tasks' AND last_error LIKE '%after 3 retries%'")[0][0] >= 1


def test_a_rate_limit_403_is_retried(env, server, waits):
    two_lists(server)
    seed_token(env, server)
    limited = Reply.json({"error": {"code": 403, "message": "Rate Limit Exceeded",
                                    "errors": [{"reason": "rateLimitExceeded", "domain": "usageLimits"}]}}, status=403)
    server.faults["/users/@me/lists"] = [limited]
    assert sync(env, ["google_tasks"])["ok"] and len(waits) == 1


def test_a_401_midway_refreshes_and_the_new_token_is_stored(env, server):
    two_lists(server)
    seed_token(env, server)
    orig = server._api
    seen = {"n": 0}

    def revoke_after_two(req):  # the access token dies after two calls
        seen["n"] += 1
        if seen["n"] == 3:
            server.token_scopes.clear()
        return orig(req)

    server.srv.route("GET", "^/tasks/v1/.*$", revoke_after_two)
    assert sync(env, ["google_tasks"])["ok"]
    assert len(completions(env)) == 9
    stored = FileTokenStore(env.tokens_dir).load("google")["access_token"]
    assert stored in server.token_scopes and READ in server.token_scopes[stored]
    assert len(server.srv.calls("POST", "/token")) == 2  # the first refresh, then the one after the 401


def test_a_token_narrowed_to_the_calendar_is_refreshed_for_every_granted_scope(env, server):
    """The Calendar sync refreshes for its own scope; the stored access token may then lack
    Tasks. The tasks sync refreshes without narrowing and stores the broader token."""
    two_lists(server)
    narrow = server.issue({CALENDAR})
    seed_token(env, server, access=narrow)
    assert sync(env, ["google_tasks"])["ok"]
    assert len(completions(env)) == 9
    refresh = server.srv.calls("POST", "/token")[0].form
    assert refresh["grant_type"] == "refresh_token" and "scope" not in refresh


def test_a_grant_without_the_tasks_scope_is_one_clear_line(env, server, run_cli):
    server.granted = {CALENDAR}
    two_lists(server)
    seed_token(env, server, scope=CALENDAR)
    code, _, err = run_cli("sync", "google_tasks")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "google_tasks = true" in err and "rhythm auth google" in err
    # a token response that said nothing of scopes: the API's own 403 says the same
    seed_token(env, server, scope="")
    code, _, err = run_cli("sync", "google_tasks")
    assert code == 1 and "does not include Google Tasks" in err
    assert q(env, "SELECT count(*) FROM samples") == [(0,)]


def test_plain_sync_includes_google_tasks_only_when_the_setting_asks(env, server, monkeypatch):
    seed_token(env, server)
    monkeypatch.setenv("RHYTHM_GOOGLE_TASKS", "false")
    assert "google_tasks" not in sync_mod.configured_sources(load_settings())
    monkeypatch.setenv("RHYTHM_GOOGLE_TASKS", "true")
    assert sync_mod.configured_sources(load_settings()) == ["google", "google_tasks"]


@pytest.mark.parametrize("tasks_on", [True, False])
def test_auth_google_asks_for_the_tasks_scope_when_the_setting_says_so(env, server, monkeypatch, tasks_on):
    monkeypatch.setenv("RHYTHM_GOOGLE_TASKS", "true" if tasks_on else "false")
    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")  # the loopback consent screen is plain http
    settings = load_settings()

    def browser(url: str) -> None:
        threading.Thread(target=lambda: httpx.get(url, follow_redirects=True), daemon=True).start()

    result = sync_mod.auth_google(settings, open_browser=False, on_url=browser, timeout_s=10)
    asked = set(server.auth_requests[0].query["scope"].split())
    assert CALENDAR in asked and (READ in asked) == tasks_on
    assert (READ in result["scope"].split()) == tasks_on
    stored = FileTokenStore(settings.tokens_dir).load("google")
    assert stored["refresh_token"] == server.refresh_token
    if tasks_on:  # and the stored authorisation syncs
        two_lists(server)
        assert sync(settings, ["google_tasks"])["ok"] and len(completions(settings)) == 9


def test_takeout_then_sync_of_the_same_account_counts_each_task_once(env, server, run_cli, tmp_path):
    two_lists(server)
    takeout = {"kind": "tasks#taskLists", "items": [
        {**server.lists[lid], "items": list(server.tasks[lid].values())} for lid in ("L1", "L2")]}
    path = tmp_path / "Takeout" / "Tasks" / "Tasks.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(takeout))
    code, _, err = run_cli("import", "tasks", tmp_path / "Takeout")
    assert code == 0, err
    after_import = completions(env)
    assert set(after_import) == {f"w{i}" for i in range(7)} | {"h1", "h2"}
    seed_token(env, server)
    assert sync(env, ["google_tasks"])["ok"]
    assert completions(env) == after_import
    assert q(env, "SELECT count(*) FROM samples") == [(9,)]


def test_takeout_that_is_not_tasks_is_one_clear_line(env, run_cli, tmp_path):
    bad = tmp_path / "Tasks.json"
    bad.write_text(json.dumps({"kind": "calendar#events", "items": [{"id": "x", "items": "nope"}]}))
    code, _, err = run_cli("import", "tasks", bad)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Tasks.json" in err
    assert q(env, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'raw_tasks'") == [(0,)]


def test_map_task_is_pure_and_takeout_maps_like_the_api():
    from common.records import Deletion, RawRecord, Sample
    from connectors.tasks.google_api import forget, map_task, read_takeout

    task = {"id": "a", "title": "x", "status": "completed", "completed": "2026-01-01T23:30:00.000Z",
            "updated": "2026-01-01T23:30:01.000Z"}
    raw, sample = map_task(task, "L", TOKYO, T0)
    assert isinstance(raw, RawRecord) and raw.natural_key == "a" and raw.kind == "google_task:L"
    assert isinstance(sample, Sample) and sample.local_day == date(2026, 1, 2) and sample.tz_offset_min == 540
    assert [type(r) for r in map_task({**task, "deleted": True}, "L", TOKYO, T0)] == [RawRecord]
    assert [type(r) for r in map_task({**task, "status": "needsAction"}, "L", TOKYO, T0)] == [RawRecord]
    assert forget("a") == Deletion("samples", {"source": "tasks", "detail": "google_tasks:a"})
    recs = list(read_takeout(io.BytesIO(json.dumps({"items": [{"id": "L", "items": [task]}]}).encode()),
                             "t.json", TOKYO, T0))
    assert [type(r) for r in recs] == [RawRecord, RawRecord, Sample] and recs[2] == sample
