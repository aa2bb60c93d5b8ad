"""STOMP adapter for ActiveMQ Classic: a publisher of scheduled wake-ups and a subscriber.

Facts this relies on (docs/notes/activemq.md): messages are persistent only with
``persistent:true``; ``AMQ_SCHEDULED_DELAY`` must be a non-negative integer string (anything else
drops the connection); never copy a received frame's headers into a new SEND (a
``scheduledJobId`` header makes it fire at once); with ``ack:client-individual`` the prefetch
caps unacked messages; a closed connection redelivers its unacked messages with
``redelivered:true``. Reconnecting is the caller's job, from a supervising loop, never from a
listener callback (stomp.py issues 351, 308, 372).

Active/standby (``TZPUSH_STOMP__ENDPOINTS``): a standby broker does not listen until it holds
the store's lock, so ``connect()`` tries the endpoints in order and keeps the first that answers;
a later ``connect()`` after a loss starts again from the first, and says so (a WARNING and
``tzpush_broker_failovers_total``) when it lands on another broker than before.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import stomp
import stomp.exception

from shared import metrics
from shared.errors import TransientError
from shared.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Frame:
    """A received message: what a handler needs, nothing of stomp.py's types."""

    destination: str
    body: bytes
    message_id: str
    ack_id: str
    subscription: str
    redelivered: bool
    headers: dict[str, str]


class _Listener(stomp.ConnectionListener):
    def __init__(self, inbox: queue.Queue[Frame] | None) -> None:
        self.inbox = inbox
        self.receipts: dict[str, threading.Event] = {}
        self.errors: list[str] = []
        self.disconnected = threading.Event()

    def on_message(self, frame: Any) -> None:
        if self.inbox is None:
            return
        h = frame.headers
        body = frame.body if isinstance(frame.body, bytes) else str(frame.body).encode()
        self.inbox.put(
            Frame(
                destination=h.get("destination", ""),
                body=body,
                message_id=h.get("message-id", ""),
                ack_id=h.get("ack", h.get("message-id", "")),
                subscription=h.get("subscription", ""),
                redelivered=h.get("redelivered", "false") == "true",
                headers=dict(h),
            )
        )

    def on_receipt(self, frame: Any) -> None:
        ev = self.receipts.get(frame.headers.get("receipt-id", ""))
        if ev is not None:
            ev.set()

    def on_error(self, frame: Any) -> None:
        msg = frame.headers.get("message", "") or str(frame.body)[:200]
        self.errors.append(msg)
        log.warning("broker error frame: %s", msg)

    def on_disconnected(self) -> None:
        self.disconnected.set()


# The broker this process last connected to, per endpoint list (``StompClient._note_connected``).
_LAST_ENDPOINT: dict[tuple[tuple[str, int], ...], tuple[str, int]] = {}
_LAST_LOCK = threading.Lock()


class StompClient:
    """One STOMP 1.2 connection to the first broker of ``settings.stomp.addresses()`` that
    answers. Use as a context manager or call connect()/close(); ``connect()`` again after a
    loss reconnects (possibly to another broker: subscriptions are the caller's to renew)."""

    def __init__(self, settings: Settings, *, inbox: queue.Queue[Frame] | None = None) -> None:
        self.settings = settings
        self.endpoints = settings.stomp.addresses()
        self.endpoint: tuple[str, int] | None = None  # the broker of the last connect()
        self._inbox = inbox
        self._conn, self._listener = self._connection(self.endpoints[0])
        self._lock = threading.Lock()

    def _connection(self, endpoint: tuple[str, int]) -> tuple[stomp.Connection12, _Listener]:
        s = self.settings.stomp
        conn = stomp.Connection12(
            [endpoint],
            heartbeats=(s.heartbeat_ms, s.heartbeat_ms),
            reconnect_attempts_max=1,
            auto_content_length=True,
            timeout=10,
            # A busy 2-core host can starve the receiver thread for a while: be lenient before
            # declaring the broker dead (3 x the negotiated interval instead of stomp.py's 1.5 x).
            heart_beat_receive_scale=3.0,
        )
        if s.use_ssl:
            conn.set_ssl(for_hosts=[endpoint])
        # A listener per connection: a late callback of a dead connection never touches this one.
        listener = _Listener(self._inbox)
        conn.set_listener("tzpush", listener)
        return conn, listener

    # -- lifecycle -------------------------------------------------------------------------
    def connect(self) -> StompClient:
        """Connect to the first endpoint that answers (in order); a TransientError naming each
        endpoint's failure when none does. Logs and counts a failover when the broker is not
        the one of the previous connect()."""
        s = self.settings.stomp
        passcode = s.passcode.get_secret_value() if s.passcode else None
        failures: list[str] = []
        self.close()
        for position, endpoint in enumerate(self.endpoints):
            conn, listener = self._connection(endpoint)
            try:
                conn.connect(s.login, passcode, wait=True)
            except (stomp.exception.StompException, OSError) as exc:
                failures.append(f"{_name(endpoint)}: {type(exc).__name__} {exc}".rstrip())
                with contextlib.suppress(Exception):
                    conn.disconnect()
                continue
            with self._lock:
                self._conn, self._listener = conn, listener
            self._send_at_once()
            self._note_connected(position, endpoint, failures)
            return self
        metrics.BROKER_ENDPOINT.set(-1)
        where = "any of the brokers" if len(failures) > 1 else "the broker"
        raise TransientError(f"cannot connect to {where} over STOMP: " + "; ".join(failures))

    def _note_connected(
        self, position: int, endpoint: tuple[str, int], failures: list[str]
    ) -> None:
        # Per process and endpoint list, not per client: a consumer builds a new client for
        # each reconnect, and its switch to the other broker must still be said.
        key = tuple(self.endpoints)
        with _LAST_LOCK:
            previous = _LAST_ENDPOINT.get(key, self.endpoint)
            _LAST_ENDPOINT[key] = endpoint
        self.endpoint = endpoint
        metrics.BROKER_ENDPOINT.set(position)
        if previous is not None and previous != endpoint:
            metrics.BROKER_FAILOVERS.inc()
            log.warning(
                "broker failover: connected to %s (endpoint %d of %d), was %s",
                _name(endpoint),
                position + 1,
                len(self.endpoints),
                _name(previous),
            )
        elif failures:
            log.info(
                "connected to the broker at %s; not answering: %s",
                _name(endpoint),
                "; ".join(failures),
            )

    def _send_at_once(self) -> None:
        """``TCP_NODELAY``: each frame leaves at once. With Nagle's algorithm a frame written
        right after another waits for the broker's delayed ACK (up to 40 ms): every flush took
        44 ms on an idle local broker, 0.5 ms without (tests/integration/test_broker_flush.py)."""
        sock = getattr(self._conn.transport, "socket", None)
        if sock is None:
            return
        with contextlib.suppress(OSError):  # an SSLSocket takes the option as well
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        try:
            if self._conn.is_connected():
                self._conn.disconnect()
        except (stomp.exception.StompException, OSError):
            pass

    def __enter__(self) -> StompClient:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return bool(self._conn.is_connected()) and not self._listener.disconnected.is_set()

    # -- sending ---------------------------------------------------------------------------
    def send(
        self,
        destination: str,
        body: bytes,
        *,
        delay_ms: int | None = None,
        persistent: bool = True,
        headers: dict[str, str] | None = None,
        receipt: bool = False,
        timeout: float = 30.0,
    ) -> None:
        """Send one message; ``delay_ms`` schedules it; ``receipt`` waits for the broker."""
        h: dict[str, str] = {"persistent": "true" if persistent else "false"}
        if delay_ms is not None:
            h["AMQ_SCHEDULED_DELAY"] = str(max(0, int(delay_ms)))
        if headers:
            h.update(headers)
        ev: threading.Event | None = None
        if receipt:
            rid = uuid.uuid4().hex
            ev = threading.Event()
            self._listener.receipts[rid] = ev
            h["receipt"] = rid
        try:
            with self._lock:
                self._conn.send(destination, body, content_type="application/json", headers=h)
        except (stomp.exception.StompException, OSError) as exc:
            raise TransientError(f"broker send to {destination} failed: {exc}") from exc
        if ev is not None:
            ok = ev.wait(timeout)
            self._listener.receipts.pop(h["receipt"], None)
            if not ok:
                raise TransientError(f"no receipt from the broker within {timeout} s")

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until the broker has processed everything sent so far on this connection.

        Receipts are answered in order, so a receipt on an empty transaction (BEGIN, ABORT)
        confirms every SEND before it without putting anything on a queue.
        """
        rid = uuid.uuid4().hex
        ev = threading.Event()
        self._listener.receipts[rid] = ev
        try:
            with self._lock:
                tx = self._conn.begin()
                self._conn.abort(tx, headers={"receipt": rid})
        except (stomp.exception.StompException, OSError) as exc:
            raise TransientError(f"broker flush failed: {exc}") from exc
        ok = ev.wait(timeout)
        self._listener.receipts.pop(rid, None)
        if not ok:
            raise TransientError(f"no receipt from the broker within {timeout} s")

    # -- receiving -------------------------------------------------------------------------
    def subscribe(self, destination: str, *, prefetch: int, sub_id: str | None = None) -> str:
        sid = sub_id or destination
        try:
            self._conn.subscribe(
                destination,
                id=sid,
                ack="client-individual",
                headers={"activemq.prefetchSize": str(prefetch)},
            )
        except (stomp.exception.StompException, OSError) as exc:
            raise TransientError(f"subscribe to {destination} failed: {exc}") from exc
        return sid

    def ack(self, frame: Frame) -> None:
        self._settle("ack", frame)

    def nack(self, frame: Frame) -> None:
        self._settle("nack", frame)

    def _settle(self, verb: str, frame: Frame) -> None:
        try:
            with self._lock:
                getattr(self._conn, verb)(frame.ack_id)
        except (stomp.exception.StompException, OSError) as exc:
            raise TransientError(f"{verb} failed: {exc}") from exc


def _name(endpoint: tuple[str, int]) -> str:
    host, port = endpoint
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
