"""One kind of request to Expo, sent well: per-thread SDK clients, the rate limiter, retries
with back-off, and the event hook for metrics.

``ExpoCalls`` is the base of ``shared.expo.sender.ExpoSender``, which adds what is about pushes
(chunks, throttled devices, projects, receipts). Kept apart so each reads alone: this module is
"how one request is made and retried" (``_with_retries``: what ``classify`` allows, and never
a resend of what Expo may have accepted), the sender is "what to send".
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from exponent_server_sdk import PushClient

from shared.domain.backoff import compute_backoff
from shared.domain.outcomes import ErrorCode, is_project_level
from shared.expo.transport import GzipSession, RateLimiter, classify
from shared.settings import ExpoSettings

log = logging.getLogger("shared.expo.sender")

MAX_MESSAGES_PER_REQUEST = 100
T = TypeVar("T")
EventHook = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class CallFailure:
    error: str
    code: ErrorCode
    message: str
    attempts: int
    permanent: bool
    projects: dict[str, list[str]] | None = None  # PUSH_TOO_MANY_EXPERIENCE_IDS: whose tokens


class ExpoCalls:
    """Requests to Expo with their rate, retries and events (see the module docstring)."""

    def __init__(
        self,
        settings: ExpoSettings,
        *,
        on_event: EventHook | None = None,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
        gzip_min_bytes: int | None = 1024,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        throttle_window_s: float = 30.0,
        rate_share: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings
        # How long a push Expo throttled (MessageRateExceeded) may still be sent again, when
        # the caller of ``send`` gives no deadline of its own.
        self._throttle_window_s = throttle_window_s
        self._on_event = on_event
        self._backoff = (backoff_base_s, backoff_cap_s)
        self._gzip_min_bytes = gzip_min_bytes
        self._rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self._sleep = sleep
        rate = settings.rate_per_second
        # ``rate_share``: this process's share of the fleet's rate (shared.store.fleet.FleetShare),
        # asked before each request; without it the whole ``rate_per_second`` is this process's.
        self._limiter = RateLimiter(
            rate, min(float(MAX_MESSAGES_PER_REQUEST), rate), sleep=sleep, share=rate_share
        )
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._sessions_lock = threading.Lock()
        self._closed = False

    def _close_sessions(self) -> None:
        with self._sessions_lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()

    def _project_errors(self, kind: str, counts: Counter[ErrorCode]) -> None:
        for code, n in counts.items():
            log.error(
                "expo %s: %d push(es) failed with %s: the project's push credentials are "
                "wrong, not the devices' (tokens untouched)",
                kind,
                n,
                code.value,
            )
            self._emit("project_error", kind=kind, code=code.value, count=n)

    def _with_retries(
        self,
        kind: str,
        count: int,
        call: Callable[[PushClient], T],
        *,
        charge: bool,
        before_first: Callable[[], None] | None = None,
    ) -> tuple[T, int] | CallFailure:
        """Run ``call`` with back-off on 429, 5xx and network errors; never raises (except what
        ``before_first``, run once just before the first try, raises)."""
        client = self._client()
        retries = self.settings.max_retries
        for attempt in range(1, retries + 2):
            if charge:
                waited = self._limiter.acquire(count)
                if waited > 0:
                    self._emit("throttle", count=count, wait_s=waited)
            if attempt == 1 and before_first is not None:
                before_first()
            started = time.monotonic()
            try:
                value = call(client)
            except Exception as exc:
                failure = classify(exc)
                status, label, text = failure.status, failure.label, failure.text
                self._emit(
                    "request",
                    kind=kind,
                    count=count,
                    status=status,
                    seconds=time.monotonic() - started,
                    attempt=attempt,
                )
                if status == 429:
                    self._emit("http_429", kind=kind, count=count, attempt=attempt)
                # Asking for receipts twice changes nothing at Expo: only sends have an outcome
                # that a resend could duplicate.
                resend_ok = kind == "receipts" and failure.code is ErrorCode.OUTCOME_UNKNOWN
                if not (failure.retryable or resend_ok):
                    self._emit("chunk_failed", kind=kind, count=count, error=label)
                    if is_project_level(failure.code):
                        self._project_errors(kind, Counter({failure.code: count}))
                    return CallFailure(
                        label, failure.code, text, attempt, True, projects=failure.projects
                    )
                if attempt > retries:
                    error = f"{label} after {retries} retries"
                    self._emit("chunk_failed", kind=kind, count=count, error=error)
                    return CallFailure(error, failure.code, text, attempt, permanent=False)
                delay = self._delay(attempt, exc)
                self._emit("retry", kind=kind, attempt=attempt, delay_s=delay, reason=label)
                log.info("expo %s: %s (%s); retry %d in %.2fs", kind, label, text, attempt, delay)
                self._sleep(delay)
            else:
                self._emit(
                    "request",
                    kind=kind,
                    count=count,
                    status=200,
                    seconds=time.monotonic() - started,
                    attempt=attempt,
                )
                return value, attempt
        raise AssertionError("unreachable")

    def _backoff_delay(self, attempt: int, cap: float | None = None) -> float:
        base, most = self._backoff
        with self._rng_lock:
            return compute_backoff(attempt, base, min(most, cap or most), self._rng)

    def _delay(self, attempt: int, exc: Exception) -> float:
        _, cap = self._backoff
        delay = self._backoff_delay(attempt)
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("Retry-After") if response is not None else None
        if retry_after:
            with contextlib.suppress(ValueError):  # an HTTP date: rare enough to ignore
                delay = max(delay, min(float(retry_after), cap))
        return delay

    def _client(self) -> PushClient:
        client: PushClient | None = getattr(self._local, "client", None)
        if client is None:
            session = GzipSession(self._gzip_min_bytes)
            session.headers.update(
                {
                    "accept": "application/json",
                    "accept-encoding": "gzip, deflate",
                    "content-type": "application/json",
                }
            )
            token = self.settings.access_token
            if token is not None:
                session.headers["Authorization"] = f"Bearer {token.get_secret_value()}"
            # Read the environment (proxies, CA bundle) once, not on every request: requests
            # otherwise scans os.environ and stats ~/.netrc per call, and a netrc entry for the
            # host would even replace our Bearer header.
            env = session.merge_environment_settings(self.settings.base_url, {}, None, None, None)
            session.proxies.update(env["proxies"])
            session.verify = env["verify"]
            session.trust_env = False
            with self._sessions_lock:
                self._sessions.append(session)
            client = PushClient(
                host=self.settings.base_url, session=session, timeout=self.settings.timeout_s
            )
            self._local.client = client
        return client

    def _emit(self, name: str, **fields: Any) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(name, fields)
        except Exception:
            log.exception("expo on_event hook failed for %r", name)
