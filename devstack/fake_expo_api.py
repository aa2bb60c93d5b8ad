"""What the Expo fake answers: validation, rate limit, tickets, receipts and injected faults.

`FakeExpoApi` is the push API's logic on decoded JSON, with no HTTP and no run-time configuration
surface; `devstack.fake_expo.FakeExpo` builds on it (configuration, records, serving) and
`devstack.fake_expo_http` turns requests into its calls. Kept apart so that the rules Expo's
clients depend on read in one place, next to this list of them.

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
- ``hang_after_accept_s`` > 0 (set at run time): an accepted send is recorded and its tickets
  issued, then the answer waits this long: a client that times out meanwhile cannot know its
  pushes went (Expo accepting and the connection dying before the answer).
- ``/_fake/*`` and ``/healthz`` never need the access token.

Tokens containing ``dead-ticket`` are DeviceNotRegistered at ticket time, tokens containing
``dead-receipt`` at receipt time (plus the explicit sets), so a demo can seed a dead device.
``ticket_errors`` scripts per-push error tickets: ``{token: [code, ...]}`` gives the next pushes
to ``token`` an error ticket with those codes in order (``"ok"`` = a normal ticket), then normal
tickets again; e.g. ``MessageRateExceeded`` for errors that are neither a dead device nor a
whole-request failure. ``receipt_errors`` does the same for the receipts of accepted pushes
(e.g. ``InvalidCredentials``, which Expo reports once it tried FCM or APNs).

``projects`` maps tokens to the Expo project (experience id) they belong to; a token it does not
name belongs to ``DEFAULT_PROJECT``. A request whose tokens span more than one project is refused
whole, as Expo does: 400 ``PUSH_TOO_MANY_EXPERIENCE_IDS`` with ``details`` mapping each project to
its tokens in the request. Checked before the rate limit and injected 5xx, and costs nothing.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable
from typing import Any

from shared.domain.validation import MAX_PAYLOAD_BYTES, is_expo_token, payload_size

MAX_MESSAGES = 100
MAX_RECEIPT_IDS = 1000
DEAD_AT_TICKET_MARK = "dead-ticket"
DEAD_AT_RECEIPT_MARK = "dead-receipt"
DEFAULT_PROJECT = "@fake/tzpush"

_BAD_GATEWAY_HTML = (
    b"<html><head><title>502 Bad Gateway</title></head>"
    b"<body><center><h1>502 Bad Gateway</h1></center></body></html>"
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


def error_body(code: str, message: str) -> dict[str, Any]:
    """Expo's whole-request error body."""
    return {"errors": [{"code": code, "message": message}]}


class FakeExpoApi:
    """The push API's state and answers: ``handle_send`` and ``handle_receipts`` take decoded JSON
    and return (status, body). Faults are plain attributes plus the ``rate_per_second`` property.
    """

    def __init__(
        self,
        *,
        access_token: str | None,
        rate_per_second: float,
        receipt_delay_s: float,
        error_rate: float,
        latency_ms: float,
        dead_at_ticket: Iterable[str],
        dead_at_receipt: Iterable[str],
        ticket_errors: dict[str, list[str]] | None,
        seed: int | None,
        max_records: int,
        receipt_errors: dict[str, list[str]] | None = None,
        projects: dict[str, str] | None = None,
    ) -> None:
        self.access_token = access_token
        self.receipt_delay_s = float(receipt_delay_s)
        self.error_rate = float(error_rate)
        self.latency_ms = float(latency_ms)
        self.hang_after_accept_s = 0.0
        self.dead_at_ticket: set[str] = set(dead_at_ticket)
        self.dead_at_receipt: set[str] = set(dead_at_receipt)
        self.ticket_errors: dict[str, list[str]] = {
            k: list(v) for k, v in (ticket_errors or {}).items()
        }
        self.receipt_errors: dict[str, list[str]] = {
            k: list(v) for k, v in (receipt_errors or {}).items()
        }
        self.projects: dict[str, str] = dict(projects or {})
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

    @property
    def rate_per_second(self) -> float:
        return self._bucket.rate

    @rate_per_second.setter
    def rate_per_second(self, value: float) -> None:
        if value < 0:
            raise ValueError("rate_per_second must be >= 0 (0 = unlimited)")
        with self._lock:
            self._bucket = _Bucket(value)

    # -- the API -----------------------------------------------------------------------------
    def check_auth(self, authorization: str | None) -> Reply | None:
        """None when ``authorization`` is accepted, else the 401 reply (counted)."""
        if self.access_token is None or authorization == f"Bearer {self.access_token}":
            return None
        self.count("http_errors:UNAUTHORIZED")
        why = "missing" if not authorization else "invalid"
        return 401, error_body("UNAUTHORIZED", f"The bearer token is {why}.")

    def _inject_5xx(self) -> Reply | None:
        if self.error_rate <= 0:
            return None
        with self._lock:
            hit = self._rng.random() < self.error_rate
            html = hit and self._rng.random() < 0.5
        if not hit:
            return None
        if html:
            self.count("http_errors:BAD_GATEWAY")
            return 502, _BAD_GATEWAY_HTML
        self.count("http_errors:INTERNAL_SERVER_ERROR")
        return 500, error_body("INTERNAL_SERVER_ERROR", "An unknown error occurred (injected).")

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``key`` of ``/_fake/stats``."""
        with self._lock:
            self._stats[key] += n

    def bad_request(self, code: str, message: str) -> Reply:
        """A 400 reply with Expo's error body for ``code`` (counted)."""
        self.count(f"http_errors:{code}")
        return 400, error_body(code, message)

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
                return self.bad_request(
                    "VALIDATION_ERROR", f'"[{index}].to" is required and must be a string'
                )
        if recipients > MAX_MESSAGES:
            return self.bad_request(
                "PUSH_TOO_MANY_NOTIFICATIONS",
                f"You are trying to send more than {MAX_MESSAGES} push notifications in one"
                f" request ({recipients}).",
            )
        mixed = self._projects_of(messages)
        if mixed:
            self.count("http_errors:PUSH_TOO_MANY_EXPERIENCE_IDS")
            return 400, {
                "errors": [
                    {
                        "code": "PUSH_TOO_MANY_EXPERIENCE_IDS",
                        "message": "All push notification messages in the same request must be "
                        "for the same project; check the details field to investigate "
                        "conflicting tokens.",
                        "details": mixed,
                        "isTransient": False,
                    }
                ]
            }
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
            return 429, error_body(
                "TOO_MANY_REQUESTS",
                f"Exceeded {rate} notifications per second, please try again.",
            )
        return 200, {"data": self._tickets(messages)}

    def _projects_of(self, messages: list[dict[str, Any]]) -> dict[str, list[str]] | None:
        """The request's tokens by project when they span more than one (else ``None``)."""
        projects = self.projects
        if not projects:  # the usual case: every token in the default project
            return None
        by_project: dict[str, list[str]] = {}
        for msg in messages:
            to = msg["to"]
            for token in to if isinstance(to, list) else [to]:
                by_project.setdefault(projects.get(token, DEFAULT_PROJECT), []).append(token)
        return by_project if len(by_project) > 1 else None

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
                    scripted_receipt = self._scripted(self.receipt_errors, token)
                    if token in dead_receipt or DEAD_AT_RECEIPT_MARK in token:
                        receipt: dict[str, Any] = {
                            "status": "error",
                            "message": f'"{token}" is not a registered push notification recipient',
                            "details": {"error": "DeviceNotRegistered", "expoPushToken": token},
                        }
                    elif scripted_receipt:
                        receipt = {
                            "status": "error",
                            "message": f"got the receipt error {scripted_receipt} scripted for "
                            "its token",
                            "details": {"error": scripted_receipt},
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
        return self._scripted(self.ticket_errors, token)

    def _scripted(self, scripts: dict[str, list[str]], token: str) -> str | None:
        """The next code scripted for ``token`` in ``scripts`` (None: none, or ``"ok"``)."""
        if not scripts:  # the usual case, read without the lock every push takes
            return None
        with self._lock:
            script = scripts.get(token)
            if not script:
                return None
            code = script.pop(0)
            if not script:
                del scripts[token]
        return None if code == "ok" else code

    def handle_receipts(self, payload: Any) -> Reply:
        """``POST /push/getReceipts``: receipts whose delay has passed; others are absent."""
        ids = payload.get("ids") if isinstance(payload, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return self.bad_request("VALIDATION_ERROR", '"ids" must be an array of strings')
        if len(ids) > MAX_RECEIPT_IDS:
            return self.bad_request(
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
