"""`rhythm serve hae`: receive pushes from Health Auto Export's REST API automation.

A small HTTP server (standard library ``ThreadingHTTPServer``) bound to 127.0.0.1 only. Each
``POST /hae`` (or ``POST /``) is one unit of work through ``rhythm.jobs.import_payload``:
the same reader as ``rhythm import hae``, one transaction, recorded in ``runs``; pushes are
imported one at a time, in arrival order.

- **Secret**: every POST must carry the ``hae_secret`` setting in an ``X-Rhythm-Secret``
  header (or ``Authorization: Bearer <secret>``); otherwise 401, and the body (within the size
  limit) is read and dropped, never parsed or stored.
  The server refuses to start without a secret of at least 16 characters.
- **Bounded**: a body needs a ``Content-Length`` (411 otherwise) of at most ``hae_max_mb``
  (413 otherwise, unread); a gzip/deflate body is bounded after decompression too. Reads time
  out after 60 s.
- **Answers** (JSON): 200 ``{"ok": true, "stored": {records, new, duplicates_skipped,
  first_day, last_day, tables}}``; a bad payload 400 (or 415 for a content type it cannot
  read) with ``{"ok": false, "error": "<one line>"}``, and nothing is stored; 503 with
  ``Retry-After`` while another writer (the daemon, an import) holds the database.
- **Stopping**: SIGINT or SIGTERM stops accepting, lets the push in progress finish (its
  transaction commits or rolls back, never half), then exits 0.

Nothing here prints: lines go to the ``log`` callback the CLI passes.
"""

from __future__ import annotations

import hmac
import json
import signal
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from common.errors import ConfigError, DatabaseBusy, RhythmError, SourceFormatError
from rhythm.jobs import import_payload
from rhythm.settings import Settings

HOST = "127.0.0.1"
SECRET_HEADER = "X-Rhythm-Secret"
MIN_SECRET = 16
READ_TIMEOUT_S = 60
#: The listen queue: connections the kernel holds while the server is busy. socketserver's
#: default of 5 reset most of a burst (several automations firing at once, a retrying proxy).
LISTEN_QUEUE = 128
#: After refusing a body unread, how long the server keeps reading (and dropping) what the
#: client still sends before it closes, so the client gets the answer instead of a reset
#: connection mid-upload (a "lingering close"); nothing read then is kept.
LINGER_S = 2.0
Log = Callable[[str], None]


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()


def check_secret(settings: Settings) -> str:
    secret = settings.hae_secret
    if not secret or len(secret) < MIN_SECRET:
        raise ConfigError(
            "hae_secret is not set (or shorter than 16 characters): choose one and set it with "
            "`rhythm config set hae_secret <secret>` (or RHYTHM_HAE_SECRET), then put the same value "
            f"in the app's automation as the header {SECRET_HEADER}"
        )
    return secret


def authorised(headers: Any, secret: str) -> bool:
    given = headers.get(SECRET_HEADER)
    if given is None:
        auth = headers.get("Authorization") or ""
        if auth[:7].lower() == "bearer ":
            given = auth[7:].strip()
    return given is not None and hmac.compare_digest(given.encode(), secret.encode())


def _decoded(body: bytes, encoding: str, limit: int) -> bytes | Answer:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        return Answer(415, {"ok": False, "error": f"unsupported Content-Encoding {encoding!r}"})
    try:
        d = zlib.decompressobj(zlib.MAX_WBITS | (16 if encoding == "gzip" else 0))
        out = d.decompress(body, limit + 1)
    except zlib.error as exc:
        return Answer(400, {"ok": False, "error": f"bad {encoding} body: {exc}"})
    if len(out) > limit:
        return Answer(413, {"ok": False, "error": f"body larger than {limit} bytes once decompressed"})
    return out


def push_name(headers: Any) -> str:
    """What the push is called in errors and `runs` (the app sends its automation's name)."""
    name = headers.get("automation-name") or ""
    name = "".join(ch for ch in name if ch.isprintable())[:80].strip()
    return f"push {name!r}" if name else "push"


def receive(settings: Settings, source: str, headers: Any, body: bytes, lock: threading.Lock) -> Answer:
    """Import one authorised push's body; the answer says what was stored."""
    name = push_name(headers)
    try:
        with lock:
            summary = import_payload(
                settings, source, body, name,
                content_type=headers.get("Content-Type"), aggregation=headers.get("automation-aggregation"),
            )
    except SourceFormatError as exc:
        status = 415 if "content type" in exc.detail else 400
        return Answer(status, {"ok": False, "error": str(exc).splitlines()[0]})
    except DatabaseBusy as exc:
        return Answer(503, {"ok": False, "error": str(exc)}, (("Retry-After", "60"),))
    except RhythmError as exc:
        return Answer(500, {"ok": False, "error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__})
    d = summary.to_dict()
    stored = {
        "records": d["records"],
        "new": sum(t["inserted"] for t in d["tables"].values()),
        "duplicates_skipped": d["duplicates_skipped"],
        "first_day": d["first_day"],
        "last_day": d["last_day"],
        "tables": {t: {"received": c["received"], "new": c["inserted"]} for t, c in d["tables"].items()},
        "rejected": d.get("rejected", {}),
    }
    return Answer(200, {"ok": True, "stored": stored})


#: A client that went away before its answer: one log line, never a traceback.
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


class PushServer(ThreadingHTTPServer):
    """One thread per connection (a burst waits in the listen queue, then for the import
    lock); pushes are imported one at a time."""

    daemon_threads = False  # server_close() waits for the push in progress
    block_on_close = True
    allow_reuse_address = True
    request_queue_size = LISTEN_QUEUE
    log: Log = staticmethod(lambda _line: None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line per failed connection (socketserver prints a traceback to stderr)."""
        import sys

        exc = sys.exc_info()[1]
        who = client_address[0] if isinstance(client_address, tuple) else str(client_address)
        if isinstance(exc, GONE):
            self.log(f"{who}: the client hung up before its answer ({type(exc).__name__})")
        else:
            self.log(f"{who}: error: unexpected {type(exc).__name__}: {str(exc)[:200]}")


def make_server(settings: Settings, source: str, port: int, *, max_bytes: int, log: Log) -> PushServer:
    """The server, bound to 127.0.0.1:port (0: any free port), not yet serving."""
    secret = check_secret(settings)
    lock = threading.Lock()
    paths = {"/", f"/{source}"}

    class Handler(BaseHTTPRequestHandler):
        server_version = "rhythm"
        sys_version = ""
        timeout = READ_TIMEOUT_S

        def _send(self, answer: Answer) -> None:
            data = (json.dumps(answer.body, ensure_ascii=False) + "\n").encode()
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in answer.headers:
                self.send_header(k, v)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def _refuse(self, status: int, error: str, *headers: tuple[str, str]) -> None:
            self.close_connection = True  # the body (if any) stays unread
            self._linger = True
            self._send(Answer(status, {"ok": False, "error": error}, headers))

        def finish(self) -> None:
            super().finish()
            if getattr(self, "_linger", False):
                self._drop_the_rest()

        def _drop_the_rest(self) -> None:
            """The lingering close (:data:`LINGER_S`): the answer is sent; stop writing and drop
            what the client is still sending until it stops, so closing with unread data does
            not reset the connection before the client has read the answer."""
            try:
                self.connection.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + LINGER_S
                while (left := deadline - time.monotonic()) > 0:
                    self.connection.settimeout(left)
                    if not self.connection.recv(1 << 16):
                        break
            except OSError:  # the client went away or the deadline passed: close as before
                pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.split("?")[0] in paths:
                self._send(Answer(200, {"ok": True, "service": f"rhythm serve {source}", "post_to": f"/{source}"}))
            else:
                self._refuse(404, "not found")

        def _drain(self, length: int) -> None:
            """Read and drop a refused body (bounded), so the client can read the answer."""
            left = length
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)

        def do_POST(self) -> None:  # noqa: N802
            if self.headers.get("Transfer-Encoding"):
                self._refuse(411, "send the body with a Content-Length (chunked bodies are not accepted)")
                return
            raw_length = self.headers.get("Content-Length")
            if raw_length is None:
                self._refuse(411, "a Content-Length header is required")
                return
            try:
                length = int(raw_length)
                if length < 0:
                    raise ValueError
            except ValueError:
                self._refuse(400, f"bad Content-Length {raw_length!r}")
                return
            if length > max_bytes:
                self._refuse(413, f"body of {length} bytes is larger than the limit of {max_bytes} (hae_max_mb)")
                return
            if self.path.split("?")[0] not in paths:
                self._drain(length)
                self._refuse(404, f"not found: POST to /{source}")
                return
            if not authorised(self.headers, secret):
                self._drain(length)  # read and dropped, never parsed or stored
                self._refuse(401, f"missing or wrong {SECRET_HEADER} header", ("WWW-Authenticate", 'Bearer realm="rhythm"'))
                return
            body = self.rfile.read(length)
            if len(body) != length:
                self._refuse(400, "the body ended before its Content-Length")
                return
            decoded = _decoded(body, self.headers.get("Content-Encoding") or "", max_bytes)
            if isinstance(decoded, Answer):
                self.close_connection = True
                self._send(decoded)
                return
            try:
                answer = receive(settings, source, self.headers, decoded, lock)
            except Exception as exc:  # a bug must not kill the server: one line, 500
                log(f"error: unexpected {type(exc).__name__} while importing a push: {str(exc)[:200]}")
                answer = Answer(500, {"ok": False, "error": f"internal error ({type(exc).__name__})"})
            self._send(answer)
            b = answer.body
            if b.get("ok"):
                st = b["stored"]
                span = f"days {st['first_day']} .. {st['last_day']}" if st["first_day"] else "no dated rows"
                log(f"{push_name(self.headers)}: {st['records']} records, {st['new']} new, "
                    f"{st['duplicates_skipped']} duplicates skipped, {span}")
            else:
                log(f"{push_name(self.headers)} refused ({answer.status}): {b.get('error')}")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            if args and str(args[0]).startswith(("GET", "POST")) and len(args) > 1 and str(args[1]) in ("200",):
                return  # successful requests are logged with what they stored
            log(f"{self.address_string()} {format % args}")

    server = PushServer((HOST, port), Handler)
    server.log = log
    return server


def serve(
    settings: Settings,
    source: str,
    port: int | None = None,
    *,
    max_mb: float | None = None,
    on_ready: Callable[[str], None] | None = None,
    log: Log | None = None,
    stop: threading.Event | None = None,
    handle_signals: bool = True,
) -> int:
    """Serve until SIGINT/SIGTERM (or ``stop`` is set); returns the exit code 0."""
    log = log or (lambda _line: None)
    max_bytes = int((max_mb if max_mb is not None else settings.hae_max_mb) * 1024 * 1024)
    if max_bytes <= 0:
        raise ConfigError("hae_max_mb must be positive")
    server = make_server(settings, source, settings.hae_port if port is None else port, max_bytes=max_bytes, log=log)
    stop = stop or threading.Event()
    previous: dict[int, Any] = {}
    if handle_signals and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda signum, _frame: stop.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="rhythm-serve")
    try:
        thread.start()
        host, bound = server.server_address[:2]
        if on_ready:
            on_ready(f"http://{host}:{bound}/{source}")
        while not stop.wait(0.5):
            pass
        log("stopping: finishing the push in progress")
    finally:
        server.shutdown()  # no new requests
        thread.join()
        server.server_close()  # waits for the request threads (block_on_close)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
