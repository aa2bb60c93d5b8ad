"""The Expo fake's HTTP side: a threading server and the request handler with its routes.

Expo's two push endpoints plus ``/healthz`` and the fake's own ``/_fake/pushes|stats|config``,
over keep-alive HTTP/1.1 with gzip request bodies, as exponent-server-sdk sends them. Separate
from `devstack.fake_expo` because this is transport only (bodies, headers, status lines, open
connections): every answer comes from the `FakeExpo` the server holds.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from devstack.fake_expo_api import Reply, error_body

SEND_PATH = "/--/api/v2/push/send"
RECEIPTS_PATH = "/--/api/v2/push/getReceipts"


class Served(Protocol):
    """What the server asks of the fake it serves (``devstack.fake_expo.FakeExpo``): named
    here, so that this module does not import the fake that imports it."""

    verbose: bool
    latency_ms: float
    hang_after_accept_s: float

    def count(self, key: str, n: int = 1) -> None: ...
    def bad_request(self, code: str, message: str) -> Reply: ...
    def check_auth(self, authorization: str | None) -> Reply | None: ...
    def handle_send(self, payload: Any) -> Reply: ...
    def handle_receipts(self, payload: Any) -> Reply: ...
    def configure(self, **changes: Any) -> dict[str, Any]: ...
    def pushes(self, since_ms: int | None = None) -> list[dict[str, Any]]: ...
    def stats(self) -> dict[str, Any]: ...
    def config(self) -> dict[str, Any]: ...
    def clear(self) -> None: ...


class FakeExpoServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], handler: type, fake: Served) -> None:
        self.fake = fake
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, handler)

    def drop_connections(self) -> None:
        with self.connections_lock:
            conns = list(self.connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class FakeExpoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so a client's Session reuses connections
    disable_nagle_algorithm = True
    # Buffered replies: status, headers and body leave in one write (flushed after each request
    # by handle_one_request), not one send per header line and body.
    wbufsize = 64 * 1024
    timeout = 120  # drop idle keep-alive connections eventually
    server: FakeExpoServer

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.fake.verbose:
            super().log_message(format, *args)

    def _reply(self, status: int, body: Any) -> None:
        if isinstance(body, bytes):
            raw, ctype = body, "text/html"
        else:
            raw, ctype = json.dumps(body, separators=(",", ":")).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", f"{ctype}; charset=utf-8")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            self._reply(411, error_body("VALIDATION_ERROR", "Content-Length is required"))
            return None
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            self.server.fake.count("gzip_requests")
            try:
                raw = zlib.decompress(raw, wbits=31)  # gzip.decompress, without its Python loop
            except (OSError, EOFError, zlib.error):
                fake = self.server.fake
                self._reply(*fake.bad_request("VALIDATION_ERROR", "bad gzip body"))
                return None
        return raw

    def do_POST(self) -> None:
        fake = self.server.fake
        path = urlsplit(self.path).path
        raw = self._body()
        if raw is None:
            return
        if path in (SEND_PATH, RECEIPTS_PATH):
            fake.count("requests")
            if fake.latency_ms > 0:
                time.sleep(fake.latency_ms / 1000)
            denied = fake.check_auth(self.headers.get("Authorization"))
            if denied:
                self._reply(*denied)
                return
            try:
                payload = json.loads(raw)
            except ValueError:
                self._reply(*fake.bad_request("VALIDATION_ERROR", "body is not valid JSON"))
                return
            handler = fake.handle_send if path == SEND_PATH else fake.handle_receipts
            status, answer = handler(payload)
            hang = fake.hang_after_accept_s
            if path == SEND_PATH and status == 200 and hang > 0:
                time.sleep(hang)
            self._reply(status, answer)
        elif path == "/_fake/config":
            try:
                self._reply(200, fake.configure(**json.loads(raw or b"{}")))
            except (ValueError, TypeError) as exc:
                self._reply(400, error_body("VALIDATION_ERROR", str(exc)))
        else:
            self._reply(404, error_body("NOT_FOUND", f"no route POST {path}"))

    def do_GET(self) -> None:
        fake = self.server.fake
        parts = urlsplit(self.path)
        if parts.path == "/healthz":
            self._reply(200, {"status": "ok"})
        elif parts.path == "/_fake/pushes":
            since = parse_qs(parts.query).get("since_ms")
            try:
                since_ms = int(since[0]) if since else None
            except ValueError:
                self._reply(400, error_body("VALIDATION_ERROR", "since_ms must be an integer"))
                return
            self._reply(200, fake.pushes(since_ms))
        elif parts.path == "/_fake/stats":
            self._reply(200, fake.stats())
        elif parts.path == "/_fake/config":
            self._reply(200, fake.config())
        else:
            self._reply(404, error_body("NOT_FOUND", f"no route GET {parts.path}"))

    def do_DELETE(self) -> None:
        if urlsplit(self.path).path == "/_fake/pushes":
            self.server.fake.clear()
            self._reply(200, {"cleared": True})
        else:
            self._reply(404, error_body("NOT_FOUND", f"no route DELETE {self.path}"))
