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
``shared.domain.outcomes``) and says whether a retry may help. A ``PUSH_TOO_MANY_EXPERIENCE_IDS``
refusal also carries Expo's ``details`` (each project's tokens), which the sender splits by; a
401 is ``UNAUTHORIZED`` whichever way the SDK surfaces it (the project's access token: an alert).
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

from shared.domain.outcomes import ErrorCode, Resend, meaning

log = logging.getLogger(__name__)


class RateLimiter:
    """Token bucket charged before a request; thread-safe.

    A charge larger than what is left puts the bucket in debt and the caller sleeps until the
    debt is paid, so callers are served in order and the long-run rate is exact, and a charge
    larger than the capacity still passes. ``share``, when given, is asked for the rate at each
    charge (this process's share of the fleet's rate: ``shared.store.fleet``); the capacity
    never exceeds one second of it.
    """

    def __init__(
        self,
        rate: float,
        capacity: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        share: Callable[[], float] | None = None,
    ) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be > 0")
        self.rate, self.capacity = rate, capacity
        self._share = share
        self._clock, self._sleep = clock, sleep
        self._level = capacity
        self._stamp = clock()
        self._lock = threading.Lock()

    def reserve(self, n: float) -> float:
        """Charge ``n`` now; return how long the caller must wait before using it."""
        with self._lock:
            if self._share is not None:
                self.rate = max(1e-3, self._share())
            capacity = min(self.capacity, self.rate)
            now = self._clock()
            self._level = min(capacity, self._level + (now - self._stamp) * self.rate)
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
    """A failed request: its HTTP status, code, short label and readable text.
    ``projects``: for ``PUSH_TOO_MANY_EXPERIENCE_IDS``, Expo's ``details``: each project (an
    experience id) and the request's tokens that belong to it, to split the request by."""

    status: int | None
    code: ErrorCode
    label: str
    text: str
    projects: dict[str, list[str]] | None = None

    @property
    def retryable(self) -> bool:
        """Whether the whole request is sent again: the code's row in ``EXPO_ERRORS`` says."""
        return meaning(self.code).resend is Resend.REQUEST


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
            return Classified(429, ErrorCode.TOO_MANY_REQUESTS, "TOO_MANY_REQUESTS", text)
        if status is not None and status >= 500:
            return Classified(status, ErrorCode.SERVER_ERROR, f"HTTP {status}", text)
        if status is None or status < 400:
            # A 2xx the SDK could not use: Expo accepted the chunk; sending it again would
            # push it twice.
            label = f"HTTP {status}" if status else "invalid response"
            return _unknown(status, label, text)
        if code == ErrorCode.TOO_MANY_EXPERIENCE_IDS.value:
            projects = _projects(first.get("details"))
            kind = ErrorCode.TOO_MANY_EXPERIENCE_IDS
            return Classified(status, kind, code, f"HTTP {status}: {text}", projects)
        if code == "UNAUTHORIZED" or status == 401:
            label = "UNAUTHORIZED"
            return Classified(status, ErrorCode.UNAUTHORIZED, label, f"HTTP {status}: {text}")
        kind = ErrorCode.REQUEST_REFUSED
        return Classified(status, kind, code or f"HTTP {status}", f"HTTP {status}: {text}")
    if isinstance(exc, requests.HTTPError):
        text = f"{exc}"
        if status is not None and status == 429:
            return Classified(429, ErrorCode.TOO_MANY_REQUESTS, "TOO_MANY_REQUESTS", text)
        if status is not None and status >= 500:
            return Classified(status, ErrorCode.SERVER_ERROR, f"HTTP {status}", text)
        if status == 401:
            return Classified(status, ErrorCode.UNAUTHORIZED, "UNAUTHORIZED", text)
        return Classified(status, ErrorCode.REQUEST_REFUSED, f"HTTP {status}", text)
    if isinstance(exc, requests.RequestException):
        label = f"network error ({type(exc).__name__})"
        if _never_reached(exc):
            return Classified(None, ErrorCode.NETWORK_ERROR, label, str(exc))
        return _unknown(None, label, str(exc))
    log.exception("unexpected error from the Expo SDK")
    label = f"client error ({type(exc).__name__})"
    return Classified(None, ErrorCode.CLIENT_ERROR, label, str(exc))


def _projects(details: Any) -> dict[str, list[str]] | None:
    """Expo's ``details`` of ``PUSH_TOO_MANY_EXPERIENCE_IDS``: project -> its tokens (``None``
    when it is not that shape: the request then fails, unsplit)."""
    if not isinstance(details, dict) or not details:
        return None
    out: dict[str, list[str]] = {}
    for project, tokens in details.items():
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            return None
        out[str(project)] = list(tokens)
    return out


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
    return Classified(status, ErrorCode.OUTCOME_UNKNOWN, label, f"{why} ({text})")
