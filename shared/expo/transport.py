"""The Expo transport: rate limiting, gzip, and what a failed request means.

The resend policy (``classify``): a chunk is sent again only when Expo certainly did not take it:
it answered 429 (refused) or 5xx (failed: Expo's own advice is to retry these), or the request
never reached it (connection refused, connect timeout). When the request reached Expo and the
answer was lost (read timeout, connection closed after the request was written) or came back as
a 2xx nobody can read, Expo may have accepted it: the chunk's pushes end ``failed`` with
"outcome unknown", never resent, as after a crash (no duplicate push; an operator can replay
them). The risk that remains is a 5xx after Expo did accept the chunk: docs/architecture.md.

Kept apart from the sender's chunking and retries (``shared.expo.sender``) so each can be read
and tested alone: ``RateLimiter`` (clock and sleep injected), ``GzipSession`` and ``classify``,
which gives every failure its ``ErrorCode`` (the one classification: see
``shared.domain.outcomes``) and says whether a retry may help.
"""

from __future__ import annotations

import gzip
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests
import urllib3
from exponent_server_sdk import PushServerError

from shared.domain.outcomes import ErrorCode

log = logging.getLogger(__name__)


class RateLimiter:
    """Token bucket charged before a request; thread-safe.

    A charge larger than what is left puts the bucket in debt and the caller sleeps until the
    debt is paid, so callers are served in order and the long-run rate is exact, and a charge
    larger than the capacity still passes.
    """

    def __init__(
        self,
        rate: float,
        capacity: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be > 0")
        self.rate, self.capacity = rate, capacity
        self._clock, self._sleep = clock, sleep
        self._level = capacity
        self._stamp = clock()
        self._lock = threading.Lock()

    def reserve(self, n: float) -> float:
        """Charge ``n`` now; return how long the caller must wait before using it."""
        with self._lock:
            now = self._clock()
            self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
            self._stamp = now
            self._level -= n
            return max(0.0, -self._level / self.rate)

    def acquire(self, n: float) -> float:
        """Charge ``n`` and wait until it is paid for; return the seconds waited."""
        delay = self.reserve(n)
        if delay > 0:
            self._sleep(delay)
        return delay


class GzipSession(requests.Session):
    """Gzip request bodies of at least ``min_bytes`` (Expo accepts them, as the Node SDK does)."""

    def __init__(self, min_bytes: int | None) -> None:
        super().__init__()
        self.min_bytes = min_bytes

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        body = request.body
        if (
            self.min_bytes is not None
            and isinstance(body, str | bytes)
            and len(body) >= self.min_bytes
            and "Content-Encoding" not in request.headers
        ):
            raw = body.encode() if isinstance(body, str) else body
            request.body = gzip.compress(raw, compresslevel=1)
            request.headers["Content-Encoding"] = "gzip"
            request.headers["Content-Length"] = str(len(request.body))
        return super().send(request, **kwargs)


@dataclass(frozen=True, slots=True)
class Classified:
    """A failed request: its HTTP status, code, short label, readable text, and retryability."""

    status: int | None
    code: ErrorCode
    label: str
    text: str
    retryable: bool


def detail_error(details: Any) -> str:
    """The per-push error code of a ticket's or receipt's ``details`` (as Expo spells it)."""
    error = details.get("error") if isinstance(details, dict) else None
    return str(error) if error else ErrorCode.UNKNOWN.value


def classify(exc: Exception) -> Classified:
    """What a failed request means (retry or not), with the code its pushes fail with."""
    response = getattr(exc, "response", None)
    status = response.status_code if isinstance(response, requests.Response) else None
    if isinstance(exc, PushServerError):
        errors = exc.errors or []
        first = errors[0] if errors and isinstance(errors[0], dict) else {}
        code = first.get("code")
        text = first.get("message") or exc.message
        if status == 429 or code == "TOO_MANY_REQUESTS":
            return Classified(429, ErrorCode.TOO_MANY_REQUESTS, "TOO_MANY_REQUESTS", text, True)
        if status is not None and status >= 500:
            return Classified(status, ErrorCode.SERVER_ERROR, f"HTTP {status}", text, True)
        if status is None or status < 400:
            # A 2xx the SDK could not use: Expo accepted the chunk; sending it again would
            # push it twice.
            label = f"HTTP {status}" if status else "invalid response"
            return _unknown(status, label, text)
        kind = ErrorCode.UNAUTHORIZED if code == "UNAUTHORIZED" else ErrorCode.REQUEST_REFUSED
        return Classified(status, kind, code or f"HTTP {status}", f"HTTP {status}: {text}", False)
    if isinstance(exc, requests.HTTPError):
        text = f"{exc}"
        if status is not None and status == 429:
            return Classified(429, ErrorCode.TOO_MANY_REQUESTS, "TOO_MANY_REQUESTS", text, True)
        if status is not None and status >= 500:
            return Classified(status, ErrorCode.SERVER_ERROR, f"HTTP {status}", text, True)
        kind = ErrorCode.UNAUTHORIZED if status == 401 else ErrorCode.REQUEST_REFUSED
        return Classified(status, kind, f"HTTP {status}", text, False)
    if isinstance(exc, requests.RequestException):
        label = f"network error ({type(exc).__name__})"
        if _never_reached(exc):
            return Classified(None, ErrorCode.NETWORK_ERROR, label, str(exc), True)
        return _unknown(None, label, str(exc))
    log.exception("unexpected error from the Expo SDK")
    label = f"client error ({type(exc).__name__})"
    return Classified(None, ErrorCode.CLIENT_ERROR, label, str(exc), False)


def _never_reached(exc: requests.RequestException) -> bool:
    """Whether the request certainly never reached the server (so a resend cannot duplicate)."""
    if isinstance(exc, (requests.ConnectTimeout, *_BEFORE_SENDING)):
        return True
    if isinstance(exc, requests.ConnectionError) and not isinstance(exc, requests.ReadTimeout):
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        return isinstance(reason, urllib3.exceptions.NewConnectionError)
    return False  # a read timeout, a connection lost after writing, a broken response body


# Refused by requests itself, before any byte was sent.
_BEFORE_SENDING = (
    requests.exceptions.InvalidURL,
    requests.exceptions.MissingSchema,
    requests.exceptions.InvalidSchema,
    requests.exceptions.InvalidHeader,
)


def _unknown(status: int | None, label: str, text: str) -> Classified:
    why = f"outcome unknown: {label}: Expo may have accepted it; not resent, to avoid a duplicate"
    return Classified(status, ErrorCode.OUTCOME_UNKNOWN, label, f"{why} ({text})", False)
