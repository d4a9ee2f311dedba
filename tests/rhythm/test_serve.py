"""`rhythm serve hae`: Health Auto Export's REST automation pushing to a real server on
127.0.0.1, over real HTTP, into a real database."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from datetime import date, timedelta
from pathlib import Path

import pytest

from lab.people import hae
from rhythm.serve import SECRET_HEADER, serve
from rhythm.settings import load_settings

REPO = Path(__file__).resolve().parents[2]
SECRET = "correct-horse-battery-staple-42"
FIRST = date(2024, 3, 4)


@pytest.fixture
def server(rhythm_home, monkeypatch):
    """A running `serve` in a thread; yields (host, port)."""
    monkeypatch.setenv("RHYTHM_HAE_SECRET", SECRET)
    settings = load_settings()
    stop = threading.Event()
    ready: list[str] = []
    lines: list[str] = []
    t = threading.Thread(target=serve, args=(settings, "hae", 0), kwargs={
        "on_ready": ready.append, "log": lines.append, "stop": stop, "handle_signals": False,
        "max_mb": 2.0})
    t.start()
    for _ in range(200):
        if ready:
            break
        threading.Event().wait(0.05)
    assert ready, "server did not start"
    host, port = ready[0].split("//")[1].split("/")[0].split(":")
    yield host, int(port), lines
    stop.set()
    t.join(timeout=30)
    assert not t.is_alive()


def post(addr, body: bytes, headers: dict[str, str] | None = None, path: str = "/hae") -> tuple[int, dict, dict]:
    host, port = addr[:2]
    con = http.client.HTTPConnection(host, port, timeout=60)
    try:
        con.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        r = con.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else {}, dict(r.getheaders())
    finally:
        con.close()


def auth(**more: str) -> dict[str, str]:
    return {SECRET_HEADER: SECRET, **more}


def sql(run_cli, query: str) -> list[dict]:
    code, out, err = run_cli("sql", "--json", query)
    assert code == 0, err
    return json.loads(out)


def stored(run_cli) -> dict[str, int]:
    if not (Path(os.environ["RHYTHM_HOME"]) / "rhythm.duckdb").exists():
        return dict(NOTHING, runs=0)  # not even a database
    out = {t: sql(run_cli, f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in ("samples", "sleep_sessions", "workouts")}
    out["raw"] = sql(run_cli, "SELECT count(*) AS n FROM duckdb_tables() WHERE table_name = 'raw_hae'")[0]["n"]
    out["runs"] = sql(run_cli, "SELECT count(*) AS n FROM runs")[0]["n"]
    return out


def day_payload(i: int, **kw) -> bytes:
    today = FIRST + timedelta(days=i)
    from datetime import datetime, timezone

    until = datetime(today.year, today.month, today.day, 21, tzinfo=timezone(timedelta(hours=1)))
    return hae.dumps(hae.payload([hae.day_data(today - timedelta(days=1)), hae.day_data(today)], until=until,
                                 **kw)).encode()


NOTHING = {"samples": 0, "sleep_sessions": 0, "workouts": 0, "raw": 0}
NONE_AT_ALL = dict(NOTHING, runs=0)


def test_pushes_are_stored_once_and_the_answer_says_what(server, run_cli):
    body = day_payload(0)
    status, answer, _ = post(server, body, auth(**{"automation-name": "Rhythm", "automation-aggregation": "minutes"}))
    assert status == 200 and answer["ok"], answer
    st = answer["stored"]
    db = stored(run_cli)
    assert st["tables"]["samples"]["new"] == db["samples"] > 1000
    assert st["new"] == sum(t["new"] for t in st["tables"].values()) and st["first_day"] <= st["last_day"]
    assert st["tables"]["sleep_sessions"]["new"] == db["sleep_sessions"] == 2
    # the same push again, then the next day's (which repeats yesterday): nothing twice
    status, again, _ = post(server, body, auth())
    assert status == 200 and again["stored"]["new"] == 0
    assert again["stored"]["duplicates_skipped"] == again["stored"]["records"] == st["records"]
    status, nxt, _ = post(server, day_payload(1), auth())
    assert status == 200 and 0 < nxt["stored"]["new"] < nxt["stored"]["records"]
    day = FIRST.isoformat()
    truth = hae.day_data(FIRST)
    assert sql(run_cli, f"SELECT steps FROM daily_activity WHERE local_day = '{day}'")[0]["steps"] == truth.total("step_count")
    runs = sql(run_cli, "SELECT kind, source, target, ok FROM runs ORDER BY id")
    assert runs == [{"kind": "import", "source": "hae", "target": t, "ok": True}
                    for t in ("push 'Rhythm'", "push", "push")]
    assert any("records" in line and "new" in line for line in server[2])


@pytest.mark.parametrize("headers", [{}, {SECRET_HEADER: "wrong-secret-wrong-secret"}, {"Authorization": "Bearer nope"},
                                     {SECRET_HEADER: SECRET[:-1]}])
def test_without_the_secret_nothing_is_read_or_stored(server, run_cli, headers):
    status, answer, head = post(server, day_payload(0), headers)
    assert status == 401 and not answer["ok"] and SECRET_HEADER in answer["error"]
    assert "WWW-Authenticate" in head
    assert stored(run_cli) == NONE_AT_ALL


def test_a_bearer_token_is_the_secret_too(server, run_cli):
    status, answer, _ = post(server, day_payload(0), {"Authorization": f"Bearer {SECRET}"})
    assert status == 200 and answer["stored"]["records"] > 0


def test_bad_payloads_get_a_4xx_and_nothing_is_stored(server, run_cli):
    good = json.loads(day_payload(0))
    bad_date = json.loads(json.dumps(good))
    bad_date["data"]["metrics"][1]["data"][3]["date"] = "03/04/2024"
    cases = [
        (json.dumps(bad_date).encode(), {}, 400, "data.metrics[1].data[3]"),
        (day_payload(0)[:-300], {}, 400, "invalid JSON"),
        (b'{"hello": "world"}', {}, 400, "no 'data' object"),
        (b"\xff\xfe not text", {}, 400, "not UTF-8"),
        (b"<xml/>", {"Content-Type": "application/xml"}, 415, "unsupported content type"),
        (b"not gzip", {"Content-Encoding": "gzip"}, 400, "gzip"),
        (b"x", {"Content-Encoding": "br"}, 415, "Content-Encoding"),
    ]
    for body, headers, status, text in cases:
        got, answer, _ = post(server, body, auth(**headers))
        assert got == status, (text, answer)
        assert not answer["ok"] and text in answer["error"] and "\n" not in answer["error"]
    assert stored(run_cli) == NONE_AT_ALL  # (a failed import records no run either)
    # and one good push after them all goes through
    assert post(server, day_payload(0), auth())[0] == 200


def test_request_size_is_bounded(server, run_cli):
    big = day_payload(0) + b" " * (3 * 1024 * 1024)  # over the 2 MB of the fixture
    status, answer, _ = post(server, big, auth())
    assert status == 413 and "larger than" in answer["error"]
    bomb = gzip.compress(b'{"data": {"metrics": []}}' + b" " * (5 * 1024 * 1024))
    status, answer, _ = post(server, bomb, auth(**{"Content-Encoding": "gzip"}))
    assert status == 413 and "decompressed" in answer["error"]
    status, answer, _ = post(server, gzip.compress(day_payload(0)), auth(**{"Content-Encoding": "gzip"}))
    assert status == 200 and answer["stored"]["records"] > 0
    # no Content-Length (chunked): refused, unread
    host, port, _ = server
    con = http.client.HTTPConnection(host, port, timeout=30)
    con.putrequest("POST", "/hae")
    con.putheader(SECRET_HEADER, SECRET)
    con.putheader("Transfer-Encoding", "chunked")
    con.endheaders()
    con.send(b"5\r\nhello\r\n0\r\n\r\n")
    r = con.getresponse()
    assert r.status == 411
    con.close()


def test_the_csv_export_arrives_as_multipart(server, run_cli):
    days = [hae.day_data(FIRST + timedelta(days=i)) for i in range(2)]
    boundary = uuid.uuid4().hex
    parts = [("HealthAutoExport-2024-03-04-2024-03-05.csv", hae.metrics_csv(days)),
             ("Workouts-2024-03-04-2024-03-05.csv", hae.workouts_csv(days))]
    body = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        f"Content-Type: text/csv\r\n\r\n{text}\r\n".encode() for name, text in parts) + f"--{boundary}--\r\n".encode()
    status, answer, _ = post(server, body, auth(**{"Content-Type": f"multipart/form-data; boundary={boundary}"}))
    assert status == 200, answer
    assert answer["stored"]["tables"]["workouts"]["new"] == sum(len(d.workouts) for d in days)
    steps = sql(run_cli, "SELECT local_day, steps FROM daily_activity ORDER BY 1")
    assert [s["steps"] for s in steps] == [d.total("step_count") for d in days]


def test_only_its_paths_answer(server):
    host, port, _ = server
    con = http.client.HTTPConnection(host, port, timeout=30)
    con.request("GET", "/")
    r = con.getresponse()
    assert r.status == 200 and json.loads(r.read())["post_to"] == "/hae"
    con.close()
    assert post(server, b"{}", auth(), path="/elsewhere")[0] == 404


def test_a_busy_database_gets_503_with_retry_after(server, run_cli, rhythm_home):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from rhythm import lock; "
         f"lock.acquire(Path({str(rhythm_home)!r}), 'test holder'); print('held', flush=True); sys.stdin.read()"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        status, answer, head = post(server, day_payload(0), auth())
        assert status == 503 and "database busy" in answer["error"] and head.get("Retry-After") == "60"
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert stored(run_cli) == NONE_AT_ALL
    assert post(server, day_payload(0), auth())[0] == 200


def test_it_will_not_start_without_a_secret(rhythm_home, run_cli, monkeypatch):
    code, _, err = run_cli("serve", "hae", "--port", "0")
    assert code == 2 and "hae_secret" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setenv("RHYTHM_HAE_SECRET", "short")
    code, _, err = run_cli("serve", "hae", "--port", "0")
    assert code == 2 and "16 characters" in err
    monkeypatch.setenv("RHYTHM_HAE_SECRET", SECRET)
    code, out, _ = run_cli("config", "show", "--json")
    assert json.loads(out)["hae_secret"] == {"value": "***", "from": "env"} and SECRET not in out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_cleanly_after_the_push(rhythm_home, run_cli, sig):
    env = {**os.environ, "RHYTHM_HAE_SECRET": SECRET, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "rhythm", "serve", "hae", "--port", "0", "--json"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = json.loads(proc.stdout.readline())["listening"]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/hae")
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        status, answer, _ = post(("127.0.0.1", port), day_payload(0), auth())
        assert status == 200
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "stopping" in err
    assert stored(run_cli)["samples"] == answer["stored"]["tables"]["samples"]["new"]


def small_push(i: int) -> bytes:
    """One push of its own: a step count at a minute nobody else pushes."""
    t = f"2024-03-{1 + i // 24:02d} {i % 24:02d}:{i % 60:02d}:00 +0100"
    return json.dumps({"data": {"metrics": [{"name": "step_count", "units": "count",
                                             "data": [{"date": t, "qty": 100 + i, "source": "iPhone"}]}],
                                "workouts": []}}).encode()


def burst(addr, bodies: list[bytes]) -> list[tuple[int, dict]]:
    """Every body posted at the same moment, each on its own connection."""
    go = threading.Barrier(len(bodies))
    out: list[tuple[int, dict] | None] = [None] * len(bodies)

    def one(i: int) -> None:
        go.wait()
        try:
            status, answer, _ = post(addr, bodies[i], auth(**{"automation-name": f"burst {i}"}))
            out[i] = (status, answer)
        except OSError as exc:  # reset by the kernel: what a short listen queue does
            out[i] = (0, {"error": repr(exc)})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return [o or (0, {}) for o in out]


@pytest.mark.slow  # 80 imports: 3-7 s
def test_a_burst_of_forty_pushes_is_stored_whole_and_once(server, run_cli):
    bodies = [small_push(i) for i in range(40)]
    first = burst(server, bodies)
    assert [s for s, _ in first] == [200] * 40, [a for s, a in first if s != 200][:3]
    assert [a["stored"]["tables"]["samples"]["new"] for _, a in first] == [1] * 40
    db = stored(run_cli)
    assert db["samples"] == 40 and db["runs"] == 40
    again = burst(server, bodies)  # the phone retries them all: nothing twice
    assert [s for s, _ in again] == [200] * 40
    assert [a["stored"]["new"] for _, a in again] == [0] * 40
    assert stored(run_cli)["samples"] == 40


def test_a_client_that_hangs_up_is_one_log_line(server, run_cli, capsys):
    import socket

    host, port, lines = server
    for _ in range(5):
        s = socket.create_connection((host, port))
        body = small_push(1)
        s.sendall(b"POST /hae HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"{SECRET_HEADER}: {SECRET}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset on close
        s.close()
    status, _, _ = post(server, small_push(2), auth())  # it still serves
    assert status == 200
    import time

    deadline = time.monotonic() + 10  # each hang-up is logged by its own handler thread
    while sum("hung up" in line for line in lines) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any("Traceback" in line or "\n" in line for line in lines), lines
    assert sum("hung up" in line for line in lines) == 5, lines
    assert "Traceback" not in capsys.readouterr().err
