"""Scripted HTTP servers on 127.0.0.1 that speak a real protocol (no internet), for tests and
for the benchmarks that drive the product through its own HTTP clients.

    with Loopback() as srv:
        srv.route("GET", "/v2/cycle", lambda req: Reply.json({...}))
        srv.route("POST", "/oauth/token", [Reply(429, headers={"Retry-After": "2"}), Reply.json(tok)])
        ... srv.url ... srv.calls("GET", "/v2/cycle") ...

A route's answer is a `Reply`, a list of them (served in order; the last one repeats), or a
callable `handler(req) -> Reply`. `Reply.drop()` closes the connection without an answer
(a server that dies); `Reply.cut(reply, after)` sends the status line, the headers (with the
full Content-Length) and the first `after` bytes of the body, then closes the connection (a
body cut mid-response). Every request is recorded in `srv.requests`. The tests' `loopback`
fixture is in tests/loopback.py.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    query_lists: dict[str, list[str]] = field(default_factory=dict)  # every value of a repeated parameter

    @property
    def form(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(self.body.decode()).items()}

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    @property
    def bearer(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    drop_connection: bool = False
    cut_after: int | None = None  # send only this many body bytes, then close

    @classmethod
    def cut(cls, reply: Reply, after: int) -> Reply:
        return cls(reply.status, reply.body, dict(reply.headers), cut_after=after)

    @classmethod
    def json(cls, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        return cls(status, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})

    @classmethod
    def empty(cls, status: int = 204) -> Reply:
        return cls(status)

    @classmethod
    def drop(cls) -> Reply:
        return cls(drop_connection=True)


Answer = Reply | list[Reply] | Callable[[Request], Reply]


class _Route:
    def __init__(self, method: str, pattern: str, answer: Answer):
        self.method = method.upper()
        self.regex = re.compile(pattern if pattern.startswith("^") else f"^{re.escape(pattern)}$")
        self.answer = answer
        self.lock = threading.Lock()

    def reply(self, req: Request) -> Reply:
        if callable(self.answer):
            return self.answer(req)
        if isinstance(self.answer, list):
            with self.lock:
                return self.answer.pop(0) if len(self.answer) > 1 else self.answer[0]
        return self.answer


class Loopback:
    """A ThreadingHTTPServer on 127.0.0.1, port chosen by the OS."""

    def __init__(self) -> None:
        self.routes: list[_Route] = []
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Request(
                    method=self.command,
                    path=parts.path,
                    query={k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    query_lists=parse_qs(parts.query, keep_blank_values=True),
                )
                with outer._lock:
                    outer.requests.append(req)
                reply = outer._dispatch(req)
                if reply.drop_connection:
                    self._hang_up()
                    return
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                if reply.cut_after is not None:
                    self.wfile.write(reply.body[: reply.cut_after])
                    self.wfile.flush()
                    self._hang_up()
                    return
                if reply.body:
                    self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve  # noqa: N815

            def _hang_up(self) -> None:
                """Close the connection without a (whole) answer: a server that dies."""
                self.close_connection = True
                try:
                    self.connection.shutdown(2)
                except OSError:
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    def _dispatch(self, req: Request) -> Reply:
        for route in reversed(self.routes):  # later routes override earlier ones
            if route.method == req.method and route.regex.match(req.path):
                try:
                    return route.reply(req)
                except Exception as exc:  # a broken test handler answers 599, visibly
                    return Reply(599, f"test handler failed: {exc!r}".encode())
        return Reply.json({"error": "no route", "path": req.path}, status=404)

    def route(self, method: str, path: str, answer: Answer) -> None:
        """`path` is exact, or a regex when it starts with '^'."""
        self.routes.append(_Route(method, path, answer))

    def calls(self, method: str | None = None, path: str | None = None) -> list[Request]:
        with self._lock:
            return [
                r for r in self.requests
                if (method is None or r.method == method.upper()) and (path is None or r.path == path)
            ]

    def start(self) -> Loopback:
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Loopback:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
