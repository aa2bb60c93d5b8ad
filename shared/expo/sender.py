"""The Expo sender: exponent-server-sdk wrapped with chunking, throttling, concurrency and retry.

The SDK (2.2.0) is used for what it does well, building each message's payload and parsing
tickets and receipts, and kept away from its traps (docs/notes/expo.md):

- its token check accepts only ``ExponentPushToken...``; ``SdkMessage`` skips it (we check tokens
  ourselves with ``validate_expo_token``, which also accepts ``ExpoPushToken[...]`` and UUIDs);
- ``publish_multiple`` loses the tickets of earlier chunks when a later one fails, so we call
  ``_publish_internal`` once per chunk of at most 100, each with its own retry;
- ``check_receipts`` drops the session (and the Authorization header): we use
  ``check_receipts_multiple`` on chunks of at most 1000;
- error tickets are read from ``details.error`` rather than the SDK's exception classes, so
  ``MismatchSenderId`` (which has no class) comes through by name like the others.

Throttling: one token bucket per sender, refilled at ``rate_per_second`` and charged with a
chunk's size *before* each request (retries included). Its capacity is one chunk (100, or the
rate if lower), far below the one second's worth Expo (and the fake) allow, so what leaves this
process never bursts past the service's window even with requests overtaking each other in
flight: a steady state earns no 429. The limit is per process: N senders share Expo's
600/s only if each is given ``rate_per_second = 600 / N``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections import namedtuple
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from exponent_server_sdk import PushClient

from shared.domain.backoff import compute_backoff
from shared.domain.outcomes import ErrorCode
from shared.errors import PermanentError, TransientError
from shared.expo.payload import SdkMessage, check_push
from shared.expo.pushes import (
    BeforeRequest,
    OnChunkDone,
    OutgoingPush,
    PreparedPush,
    PushOutcome,
    ReceiptOutcome,
)
from shared.expo.transport import GzipSession, RateLimiter, classify, detail_error
from shared.settings import ExpoSettings

log = logging.getLogger(__name__)

MAX_MESSAGES_PER_REQUEST = 100
MAX_RECEIPTS_PER_REQUEST = 1000

T = TypeVar("T")
EventHook = Callable[[str, dict[str, Any]], None]


_TicketRef = namedtuple("_TicketRef", ["id"])  # what check_receipts_multiple reads


@dataclass(frozen=True, slots=True)
class _Failure:
    error: str
    code: ErrorCode
    message: str
    attempts: int
    permanent: bool


class ExpoSender:
    """Sends pushes through Expo (or the fake) and fetches receipts; never raises per message.

    ``on_event(name, fields)`` is told about ``request`` (kind, count, status, seconds,
    attempt), ``http_429`` (kind, count, attempt), ``retry`` (kind, attempt, delay_s, reason),
    ``throttle`` (count, wait_s) and ``chunk_failed`` (kind, count, error); it is for metrics
    and its exceptions are logged and swallowed.
    """

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
    ) -> None:
        self.settings = settings
        self._on_event = on_event
        self._backoff = (backoff_base_s, backoff_cap_s)
        self._gzip_min_bytes = gzip_min_bytes
        self._rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self._sleep = sleep
        rate = settings.rate_per_second
        self._limiter = RateLimiter(rate, min(float(MAX_MESSAGES_PER_REQUEST), rate), sleep=sleep)
        self._pool = ThreadPoolExecutor(settings.concurrency, thread_name_prefix="expo-send")
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._sessions_lock = threading.Lock()
        self._closed = False

    # -- public API --------------------------------------------------------------------------
    def send(
        self,
        pushes: Sequence[OutgoingPush | PreparedPush],
        on_chunk_done: OnChunkDone | None = None,
        before_request: BeforeRequest | None = None,
    ) -> list[PushOutcome]:
        """Send ``pushes``; return one outcome per push, in the same order.

        Pushes go in chunks of 100, each prepared and sent by a worker thread. A push refused
        before sending (bad token, payload too big: ``attempts == 0``) is reported with its
        chunk. Each chunk's outcomes go to ``on_chunk_done`` as soon as its request returns, one
        call at a time (from a worker thread), so tickets can be recorded before anything else
        can fail. If ``on_chunk_done`` raises, chunks not yet started are not sent and the error
        is re-raised here once the requests in flight have finished.
        """
        if self._closed:
            raise RuntimeError("ExpoSender is closed")
        results: list[PushOutcome | None] = [None] * len(pushes)
        callback_lock = threading.Lock()

        def deliver(items: list[tuple[int, PushOutcome]]) -> None:
            for index, outcome in items:
                results[index] = outcome
            if on_chunk_done is not None and items:
                with callback_lock:
                    on_chunk_done([outcome for _, outcome in items])

        indexed = list(enumerate(pushes))
        step = MAX_MESSAGES_PER_REQUEST
        futures: list[Future[None]] = [
            self._pool.submit(self._send_chunk, indexed[i : i + step], deliver, before_request)
            for i in range(0, len(indexed), step)
        ]
        _, pending = wait(futures, return_when=FIRST_EXCEPTION)
        if pending:  # a callback (or a bug) raised: send nothing more, let in-flight finish
            for future in pending:
                future.cancel()
            wait(pending)
        for future in futures:
            error = None if future.cancelled() else future.exception()
            if error is not None:
                raise error
        return [outcome for outcome in results if outcome is not None]

    def prepare(self, pushes: Sequence[OutgoingPush]) -> list[PreparedPush]:
        """Check and build ``pushes`` now, so ``send`` has only the requests left to do."""
        out = []
        for push in pushes:
            checked = check_push(push)
            if isinstance(checked, SdkMessage):
                checked.get_payload()  # built once and kept
            out.append(PreparedPush(push, checked))
        return out

    def get_receipts(self, ticket_ids: Sequence[str]) -> dict[str, ReceiptOutcome]:
        """Receipts for ``ticket_ids`` (chunks of 1000); ids with no receipt yet are absent.

        Raises TransientError when a chunk still fails after the retries (poll again later)
        and PermanentError on a 4xx other than 429 (configuration: token, URL).
        """
        wanted = list(dict.fromkeys(ticket_ids))
        found: dict[str, ReceiptOutcome] = {}
        for start in range(0, len(wanted), MAX_RECEIPTS_PER_REQUEST):
            chunk = wanted[start : start + MAX_RECEIPTS_PER_REQUEST]
            refs = [_TicketRef(ticket_id) for ticket_id in chunk]

            def check(client: PushClient, refs: list[Any] = refs) -> list[Any]:
                return list(client.check_receipts_multiple(refs))

            result = self._with_retries("receipts", len(chunk), check, charge=False)
            if isinstance(result, _Failure):
                error = PermanentError if result.permanent else TransientError
                raise error(f"getReceipts failed: {result.error}: {result.message}")
            receipts, _ = result
            asked = set(chunk)
            for receipt in receipts:
                if receipt.id not in asked:
                    continue
                ok = receipt.status == "ok"
                found[receipt.id] = ReceiptOutcome(
                    ticket_id=receipt.id,
                    ok=ok,
                    error=None if ok else detail_error(receipt.details),
                    message=receipt.message or "",
                )
        return found

    def close(self) -> None:
        """Wait for requests in flight, then close the connections."""
        self._closed = True
        self._pool.shutdown(wait=True)
        with self._sessions_lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()

    def __enter__(self) -> ExpoSender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------
    def _send_chunk(
        self,
        chunk: list[tuple[int, OutgoingPush | PreparedPush]],
        deliver: Callable[[list[tuple[int, PushOutcome]]], None],
        before_request: Callable[[list[str]], None] | None = None,
    ) -> None:
        outcomes: list[tuple[int, PushOutcome]] = []
        ready: list[tuple[int, OutgoingPush, SdkMessage]] = []
        for index, item in chunk:
            if isinstance(item, PreparedPush):
                push, checked = item.push, item.ready
            else:
                push, checked = item, check_push(item)
            if isinstance(checked, PushOutcome):
                outcomes.append((index, checked))
            else:
                ready.append((index, push, checked))
        if ready:
            first: Callable[[], None] | None = None
            if before_request is not None:
                ids = [push.message_id for _, push, _ in ready]

                def first() -> None:
                    # Told which messages may leave from now on (the caller's crash record),
                    # after the rate limiter let the request go: a request waiting its turn
                    # when the process dies was certainly not sent.
                    before_request(ids)

            outcomes.extend(self._publish(ready, first))
            outcomes.sort(key=lambda item: item[0])
        deliver(outcomes)

    def _publish(
        self,
        ready: list[tuple[int, OutgoingPush, SdkMessage]],
        before_first: Callable[[], None] | None = None,
    ) -> list[tuple[int, PushOutcome]]:
        messages = [message for _, _, message in ready]
        result = self._with_retries(
            "send",
            len(messages),
            lambda client: client._publish_internal(messages),
            charge=True,
            before_first=before_first,
        )
        outcomes: list[tuple[int, PushOutcome]] = []
        if isinstance(result, _Failure):
            for index, push, _ in ready:
                outcome = PushOutcome(
                    push.message_id,
                    False,
                    None,
                    result.error,
                    result.message,
                    result.attempts,
                    result.code,
                )
                outcomes.append((index, outcome))
            return outcomes
        tickets, attempts = result
        for (index, push, _), ticket in zip(ready, tickets, strict=True):
            if ticket.status == "ok" and ticket.id:
                outcome = PushOutcome(push.message_id, True, ticket.id, None, "", attempts)
            else:
                error = detail_error(ticket.details)
                text = ticket.message or error
                code = ErrorCode.of_push(error)
                outcome = PushOutcome(push.message_id, False, None, error, text, attempts, code)
            outcomes.append((index, outcome))
        return outcomes

    def _with_retries(
        self,
        kind: str,
        count: int,
        call: Callable[[PushClient], T],
        *,
        charge: bool,
        before_first: Callable[[], None] | None = None,
    ) -> tuple[T, int] | _Failure:
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
                if not failure.retryable:
                    self._emit("chunk_failed", kind=kind, count=count, error=label)
                    return _Failure(label, failure.code, text, attempt, permanent=True)
                if attempt > retries:
                    error = f"{label} after {retries} retries"
                    self._emit("chunk_failed", kind=kind, count=count, error=error)
                    return _Failure(error, failure.code, text, attempt, permanent=False)
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

    def _delay(self, attempt: int, exc: Exception) -> float:
        base, cap = self._backoff
        with self._rng_lock:
            delay = compute_backoff(attempt, base, cap, self._rng)
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
