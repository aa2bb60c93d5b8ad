"""A local fake of Expo's push HTTP API, served over real HTTP, for tests, benches and demos.

It speaks the wire format in ``notes/expo.md`` closely enough that exponent-server-sdk's own
``PushClient`` (and our ``ExpoSender``) cannot tell it from Expo, and it adds what Expo cannot
give: a record of every accepted push with its arrival time, counters, and faults on demand.

Behaviour chosen where Expo leaves room (each is what the notes document):

- A ``to`` that is not ``ExponentPushToken[...]``, ``ExpoPushToken[...]`` or a UUID gets an error
  *ticket* ``DeviceNotRegistered`` ("... is not a registered push notification recipient", the
  message quoted by the SDK), not a whole-request error: the other messages still go.
- A message whose compact UTF-8 JSON exceeds 4096 bytes gets an error *ticket* ``MessageTooBig``.
- A request that is not JSON, or whose messages lack a string ``to``, is a 400 VALIDATION_ERROR.
- Rate limit: a token bucket per fake (one project) refilled at ``rate_per_second`` with a
  capacity of one second's worth (at least 100, so any legal request can pass), charged with the
  request's notification count only when the request is accepted. A refused request is a 429
  TOO_MANY_REQUESTS and costs nothing. 0 = unlimited.
- Injected 5xx (``error_rate``, seeded RNG) happen before the rate check and accept nothing:
  half are 502 with an HTML body, half 500 INTERNAL_SERVER_ERROR JSON.
- Receipts exist ``receipt_delay_s`` after the ticket; before that the id is absent.
- ``/_fake/*`` and ``/healthz`` never need the access token.

Tokens containing ``dead-ticket`` are DeviceNotRegistered at ticket time, tokens containing
``dead-receipt`` at receipt time (plus the explicit sets), so a demo can seed a dead device.
``ticket_errors`` scripts per-push error tickets: ``{token: [code, ...]}`` gives the next pushes
to ``token`` an error ticket with those codes in order (``"ok"`` = a normal ticket), then normal
tickets again; e.g. ``MessageRateExceeded`` for errors that are neither a dead device nor a
whole-request failure.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import signal
import socket
import threading
import time
import uuid
import zlib
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from shared.errors import InputError
from shared.settings import Settings
from shared.validation import MAX_PAYLOAD_BYTES, is_expo_token, payload_size

SEND_PATH = "/--/api/v2/push/send"
RECEIPTS_PATH = "/--/api/v2/push/getReceipts"
MAX_MESSAGES = 100
MAX_RECEIPT_IDS = 1000
DEAD_AT_TICKET_MARK = "dead-ticket"
DEAD_AT_RECEIPT_MARK = "dead-receipt"

_BAD_GATEWAY_HTML = (
    b"<html><head><title>502 Bad Gateway</title></head>"
    b"<body><center><h1>502 Bad Gateway</h1></center></body></html>"
)
_CONFIG_KEYS = (
    "rate_per_second",
    "error_rate",
    "latency_ms",
    "receipt_delay_s",
    "dead_at_ticket",
    "dead_at_receipt",
    "ticket_errors",
    "access_token",
)

Reply = tuple[int, Any]  # (HTTP status, JSON-able body or raw bytes for HTML)


class _Bucket:
    """Token bucket: ``rate`` per second, capacity one second's worth (>= one full request)."""

    def __init__(self, rate: float) -> None:
        self.rate = float(rate)
        self.capacity = max(self.rate, float(MAX_MESSAGES))
        self.level = self.capacity
        self.stamp = time.monotonic()

    def take(self, n: int) -> bool:
        if self.rate <= 0:
            return True
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.level >= n:
            self.level -= n
            return True
        return False


def _errors(code: str, message: str) -> dict[str, Any]:
    return {"errors": [{"code": code, "message": message}]}


class FakeExpo:
    """The fake's state and logic; ``start()`` serves it over HTTP on a background thread.

    Faults are plain attributes (``error_rate``, ``latency_ms``, ``receipt_delay_s``,
    ``dead_at_ticket``, ``dead_at_receipt``, ``access_token``) plus the ``rate_per_second``
    property; ``configure(**changes)`` sets several at once, as ``POST /_fake/config`` does.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        access_token: str | None = None,
        rate_per_second: float = 600.0,
        receipt_delay_s: float = 1.0,
        error_rate: float = 0.0,
        latency_ms: float = 0.0,
        dead_at_ticket: Iterable[str] = (),
        dead_at_receipt: Iterable[str] = (),
        ticket_errors: dict[str, list[str]] | None = None,
        seed: int | None = None,
        max_records: int = 200_000,
        verbose: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.access_token = access_token
        self.receipt_delay_s = float(receipt_delay_s)
        self.error_rate = float(error_rate)
        self.latency_ms = float(latency_ms)
        self.dead_at_ticket: set[str] = set(dead_at_ticket)
        self.dead_at_receipt: set[str] = set(dead_at_receipt)
        self.ticket_errors: dict[str, list[str]] = {
            k: list(v) for k, v in (ticket_errors or {}).items()
        }
        self.verbose = verbose
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._bucket = _Bucket(rate_per_second)
        self._pushes: deque[dict[str, Any]] = deque(maxlen=max_records)
        self._receipts: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._max_records = max_records
        self._stats: Counter[str] = Counter()
        # Ticket ids: a random UUID-v4 prefix per fake and a counter. uuid4() per push would
        # call os.urandom, which releases the GIL and, with several handler threads busy,
        # costs milliseconds to get it back: it alone capped the fake near 4k pushes/s.
        self._id_prefix = str(uuid.uuid4())[:24]
        self._id_counter = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- configuration -----------------------------------------------------------------------
    @property
    def rate_per_second(self) -> float:
        return self._bucket.rate

    @rate_per_second.setter
    def rate_per_second(self, value: float) -> None:
        if value < 0:
            raise ValueError("rate_per_second must be >= 0 (0 = unlimited)")
        with self._lock:
            self._bucket = _Bucket(value)

    def config(self) -> dict[str, Any]:
        return {
            "rate_per_second": self.rate_per_second,
            "error_rate": self.error_rate,
            "latency_ms": self.latency_ms,
            "receipt_delay_s": self.receipt_delay_s,
            "dead_at_ticket": sorted(self.dead_at_ticket),
            "dead_at_receipt": sorted(self.dead_at_receipt),
            "ticket_errors": {k: list(v) for k, v in self.ticket_errors.items()},
            "access_token_set": self.access_token is not None,
        }

    def configure(self, **changes: Any) -> dict[str, Any]:
        """Change faults at run time; unknown keys or bad values raise ValueError."""
        unknown = set(changes) - set(_CONFIG_KEYS)
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)}; known: {list(_CONFIG_KEYS)}")
        for key in ("rate_per_second", "error_rate", "latency_ms", "receipt_delay_s"):
            if key in changes:
                value = changes[key]
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                    raise ValueError(f"{key} must be a number >= 0, not {value!r}")
                if key == "error_rate" and value > 1:
                    raise ValueError(f"error_rate must be within 0..1, not {value!r}")
        for key in ("dead_at_ticket", "dead_at_receipt"):
            if key in changes and not (
                isinstance(changes[key], list | tuple | set)
                and all(isinstance(t, str) for t in changes[key])
            ):
                raise ValueError(f"{key} must be a list of token strings")
        if "ticket_errors" in changes:
            scripts = changes["ticket_errors"]
            if not (
                isinstance(scripts, dict)
                and all(
                    isinstance(k, str)
                    and isinstance(v, list)
                    and all(isinstance(c, str) and c for c in v)
                    for k, v in scripts.items()
                )
            ):
                raise ValueError("ticket_errors must map token strings to lists of error codes")
        token = changes.get("access_token")
        if token is not None and not (isinstance(token, str) and token):
            raise ValueError("access_token must be a non-empty string or null")
        for key, value in changes.items():
            if key in ("dead_at_ticket", "dead_at_receipt"):
                value = set(value)
            elif key == "ticket_errors":
                value = {k: list(v) for k, v in value.items()}
            elif key in ("error_rate", "latency_ms", "receipt_delay_s"):
                value = float(value)
            setattr(self, key, value)
        return self.config()

    # -- recorded state ----------------------------------------------------------------------
    def pushes(self, since_ms: int | None = None) -> list[dict[str, Any]]:
        """Accepted pushes, oldest first: to, title, body, data, received_at_ms, ticket_id."""
        with self._lock:
            records = list(self._pushes)
        if since_ms is not None:
            records = [r for r in records if r["received_at_ms"] >= since_ms]
        return records

    def clear(self) -> None:
        """Forget recorded pushes, receipts and counters (faults stay as they are)."""
        with self._lock:
            self._pushes.clear()
            self._receipts.clear()
            self._stats.clear()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self._stats)
        nested: dict[str, Any] = {"ticket_errors": {}, "http_errors": {}}
        for key, value in counts.items():
            group, _, name = key.partition(":")
            if name:
                nested[group][name] = value
            else:
                nested[key] = value
        for key in (
            "requests",
            "pushes_accepted",
            "http_429",
            "receipts_returned",
            "gzip_requests",
        ):
            nested.setdefault(key, 0)
        return nested

    # -- the API -----------------------------------------------------------------------------
    def _check_auth(self, authorization: str | None) -> Reply | None:
        if self.access_token is None or authorization == f"Bearer {self.access_token}":
            return None
        self._count("http_errors:UNAUTHORIZED")
        why = "missing" if not authorization else "invalid"
        return 401, _errors("UNAUTHORIZED", f"The bearer token is {why}.")

    def _inject_5xx(self) -> Reply | None:
        if self.error_rate <= 0:
            return None
        with self._lock:
            hit = self._rng.random() < self.error_rate
            html = hit and self._rng.random() < 0.5
        if not hit:
            return None
        if html:
            self._count("http_errors:BAD_GATEWAY")
            return 502, _BAD_GATEWAY_HTML
        self._count("http_errors:INTERNAL_SERVER_ERROR")
        return 500, _errors("INTERNAL_SERVER_ERROR", "An unknown error occurred (injected).")

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._stats[key] += n

    def _bad_request(self, code: str, message: str) -> Reply:
        self._count(f"http_errors:{code}")
        return 400, _errors(code, message)

    def handle_send(self, payload: Any) -> Reply:
        """``POST /push/send`` after auth and body decoding: validate, throttle, issue tickets."""
        messages = payload if isinstance(payload, list) else [payload]
        recipients = 0
        for index, msg in enumerate(messages):
            to = msg.get("to") if isinstance(msg, dict) else None
            if isinstance(to, str):
                recipients += 1
            elif isinstance(to, list) and to and all(isinstance(t, str) for t in to):
                recipients += len(to)
            else:
                return self._bad_request(
                    "VALIDATION_ERROR", f'"[{index}].to" is required and must be a string'
                )
        if recipients > MAX_MESSAGES:
            return self._bad_request(
                "PUSH_TOO_MANY_NOTIFICATIONS",
                f"You are trying to send more than {MAX_MESSAGES} push notifications in one"
                f" request ({recipients}).",
            )
        injected = self._inject_5xx()
        if injected:
            return injected
        with self._lock:
            accepted = self._bucket.take(recipients)
            if not accepted:
                self._stats["http_429"] += 1
                self._stats["http_errors:TOO_MANY_REQUESTS"] += 1
        if not accepted:
            rate = f"{self.rate_per_second:g}"
            return 429, _errors(
                "TOO_MANY_REQUESTS",
                f"Exceeded {rate} notifications per second, please try again.",
            )
        return 200, {"data": self._tickets(messages)}

    def _tickets(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        now_ms = int(time.time() * 1000)
        ready_at = time.monotonic() + self.receipt_delay_s
        dead_ticket, dead_receipt = self.dead_at_ticket, self.dead_at_receipt
        tickets: list[dict[str, Any]] = []
        records: list[dict[str, Any]] = []
        receipts: list[tuple[str, dict[str, Any]]] = []
        errors: Counter[str] = Counter()
        for msg in messages:
            to = msg["to"]
            too_big = payload_size(msg) > MAX_PAYLOAD_BYTES
            for token in to if isinstance(to, list) else [to]:
                dead = token in dead_ticket or DEAD_AT_TICKET_MARK in token
                scripted = self._scripted_error(token)
                if dead or not is_expo_token(token):
                    error, text = "DeviceNotRegistered", "is not a registered push notification"
                elif scripted:
                    error, text = scripted, f"got the error {scripted} scripted for its token"
                elif too_big:
                    error, text = "MessageTooBig", f"payload exceeds {MAX_PAYLOAD_BYTES} bytes"
                else:
                    ticket_id = f"{self._id_prefix}{next(self._id_counter):012x}"
                    tickets.append({"status": "ok", "id": ticket_id})
                    records.append(
                        {
                            "to": token,
                            "title": msg.get("title"),
                            "body": msg.get("body"),
                            "data": msg.get("data"),
                            "received_at_ms": now_ms,
                            "ticket_id": ticket_id,
                        }
                    )
                    if token in dead_receipt or DEAD_AT_RECEIPT_MARK in token:
                        receipt: dict[str, Any] = {
                            "status": "error",
                            "message": f'"{token}" is not a registered push notification recipient',
                            "details": {"error": "DeviceNotRegistered", "expoPushToken": token},
                        }
                    else:
                        receipt = {"status": "ok"}
                    receipts.append((ticket_id, receipt))
                    continue
                errors[error] += 1
                details: dict[str, Any] = {"error": error}
                if error == "DeviceNotRegistered":
                    details["expoPushToken"] = token
                    text = f'"{token}" {text} recipient'
                else:
                    text = f"Message {text}"
                tickets.append({"status": "error", "message": text, "details": details})
        with self._lock:
            self._pushes.extend(records)
            for ticket_id, receipt in receipts:
                self._receipts[ticket_id] = (ready_at, receipt)
            while len(self._receipts) > self._max_records:
                self._receipts.popitem(last=False)
            self._stats["pushes_accepted"] += len(records)
            for error, n in errors.items():
                self._stats[f"ticket_errors:{error}"] += n
        return tickets

    def _scripted_error(self, token: str) -> str | None:
        """The next scripted ticket error for ``token`` (None: a normal ticket)."""
        if not self.ticket_errors:  # the usual case, read without the lock every push takes
            return None
        with self._lock:
            script = self.ticket_errors.get(token)
            if not script:
                return None
            code = script.pop(0)
            if not script:
                del self.ticket_errors[token]
        return None if code == "ok" else code

    def handle_receipts(self, payload: Any) -> Reply:
        """``POST /push/getReceipts``: receipts whose delay has passed; others are absent."""
        ids = payload.get("ids") if isinstance(payload, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return self._bad_request("VALIDATION_ERROR", '"ids" must be an array of strings')
        if len(ids) > MAX_RECEIPT_IDS:
            return self._bad_request(
                "PUSH_TOO_MANY_RECEIPTS",
                f"You are trying to get more than {MAX_RECEIPT_IDS} push receipts in one request"
                f" ({len(ids)}).",
            )
        injected = self._inject_5xx()
        if injected:
            return injected
        now = time.monotonic()
        data: dict[str, Any] = {}
        with self._lock:
            for receipt_id in ids:
                entry = self._receipts.get(receipt_id)
                if entry is not None and entry[0] <= now:
                    data[receipt_id] = entry[1]
            self._stats["receipts_returned"] += len(data)
        return 200, {"data": data}

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeExpo is not started")
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def start(self) -> FakeExpo:
        """Bind (port 0 = a free port) and serve on a daemon thread; ``url`` is then set."""
        if self._server is not None:
            return self
        self._server = _Server((self.host, self.port), _Handler, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="fake-expo",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop open keep-alive connections."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.drop_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeExpo:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], handler: type, fake: FakeExpo) -> None:
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so a client's Session reuses connections
    disable_nagle_algorithm = True
    # Buffered replies: status, headers and body leave in one write (flushed after each request
    # by handle_one_request), not one send per header line and body.
    wbufsize = 64 * 1024
    timeout = 120  # drop idle keep-alive connections eventually
    server: _Server

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
            self._reply(411, _errors("VALIDATION_ERROR", "Content-Length is required"))
            return None
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            self.server.fake._count("gzip_requests")
            try:
                raw = zlib.decompress(raw, wbits=31)  # gzip.decompress, without its Python loop
            except (OSError, EOFError, zlib.error):
                fake = self.server.fake
                self._reply(*fake._bad_request("VALIDATION_ERROR", "bad gzip body"))
                return None
        return raw

    def do_POST(self) -> None:
        fake = self.server.fake
        path = urlsplit(self.path).path
        raw = self._body()
        if raw is None:
            return
        if path in (SEND_PATH, RECEIPTS_PATH):
            fake._count("requests")
            if fake.latency_ms > 0:
                time.sleep(fake.latency_ms / 1000)
            denied = fake._check_auth(self.headers.get("Authorization"))
            if denied:
                self._reply(*denied)
                return
            try:
                payload = json.loads(raw)
            except ValueError:
                self._reply(*fake._bad_request("VALIDATION_ERROR", "body is not valid JSON"))
                return
            handler = fake.handle_send if path == SEND_PATH else fake.handle_receipts
            self._reply(*handler(payload))
        elif path == "/_fake/config":
            try:
                self._reply(200, fake.configure(**json.loads(raw or b"{}")))
            except (ValueError, TypeError) as exc:
                self._reply(400, _errors("VALIDATION_ERROR", str(exc)))
        else:
            self._reply(404, _errors("NOT_FOUND", f"no route POST {path}"))

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
                self._reply(400, _errors("VALIDATION_ERROR", "since_ms must be an integer"))
                return
            self._reply(200, fake.pushes(since_ms))
        elif parts.path == "/_fake/stats":
            self._reply(200, fake.stats())
        elif parts.path == "/_fake/config":
            self._reply(200, fake.config())
        else:
            self._reply(404, _errors("NOT_FOUND", f"no route GET {parts.path}"))

    def do_DELETE(self) -> None:
        if urlsplit(self.path).path == "/_fake/pushes":
            self.server.fake.clear()
            self._reply(200, {"cleared": True})
        else:
            self._reply(404, _errors("NOT_FOUND", f"no route DELETE {self.path}"))


# -- CLI ---------------------------------------------------------------------------------------
def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "fake-expo",
        help="run a local fake of Expo's push API (foreground, Ctrl-C stops)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default local.fake_expo_port)")
    p.add_argument("--access-token", default=None, help="require this bearer token")
    p.add_argument("--no-auth", action="store_true", help="ignore expo.access_token")
    p.add_argument("--rate", type=float, default=600.0, help="notifications/s; 0 = unlimited")
    p.add_argument("--receipt-delay", type=float, default=1.0, help="seconds before receipts")
    p.add_argument("--error-rate", type=float, default=0.0, help="probability of a 5xx (0..1)")
    p.add_argument("--latency-ms", type=float, default=0.0, help="added latency per API call")
    p.add_argument(
        "--dead-at-ticket",
        action="append",
        default=[],
        metavar="TOKEN",
        help="DeviceNotRegistered ticket for TOKEN (repeatable; also any token with dead-ticket)",
    )
    p.add_argument(
        "--dead-at-receipt",
        action="append",
        default=[],
        metavar="TOKEN",
        help="DeviceNotRegistered receipt for TOKEN (repeatable; also any with dead-receipt)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed for injected errors")
    p.add_argument("--max-records", type=int, default=200_000, help="pushes/receipts kept")
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.set_defaults(func=_cmd_fake_expo)


def _cmd_fake_expo(args: argparse.Namespace, settings: Settings) -> int:
    token = args.access_token
    if token is None and not args.no_auth and settings.expo.access_token is not None:
        token = settings.expo.access_token.get_secret_value()
    if args.rate < 0 or not 0 <= args.error_rate <= 1 or args.latency_ms < 0:
        raise InputError("--rate and --latency-ms must be >= 0, --error-rate within 0..1")
    if args.receipt_delay < 0 or args.max_records < 1:
        raise InputError("--receipt-delay must be >= 0 and --max-records >= 1")
    fake = FakeExpo(
        args.host,
        args.port if args.port is not None else settings.local.fake_expo_port,
        access_token=token,
        rate_per_second=args.rate,
        receipt_delay_s=args.receipt_delay,
        error_rate=args.error_rate,
        latency_ms=args.latency_ms,
        dead_at_ticket=args.dead_at_ticket,
        dead_at_receipt=args.dead_at_receipt,
        seed=args.seed,
        max_records=args.max_records,
        verbose=args.verbose,
    )
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        fake.start()
        auth = "bearer token required" if token else "no auth"
        print(f"fake Expo listening on {fake.url} ({auth}, {args.rate:g}/s)", flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        fake.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"fake Expo stopped: {json.dumps(fake.stats())}", flush=True)
    return 0
