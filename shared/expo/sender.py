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

Throttling: one token bucket per sender, refilled at its share of the fleet's rate
(``rate_per_second`` / live senders: ``shared.store.fleet``) and charged with a chunk's size
*before* each request (retries included). Its capacity is one chunk (100, or the rate if lower),
far below the one second's worth Expo (and the fake) allow, so what leaves this process never
bursts past the service's window even with requests overtaking each other in flight: a steady
state earns no 429. The requests themselves (clients, retries, events) are ``shared.expo.calls``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter, namedtuple
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

from exponent_server_sdk import PushClient

from shared.domain.outcomes import ErrorCode, Resend, is_project_level, meaning
from shared.errors import PermanentError, TransientError
from shared.expo.calls import (
    MAX_MESSAGES_PER_REQUEST,
    CallFailure,
    ExpoCalls,
)
from shared.expo.payload import SdkMessage, check_push
from shared.expo.pushes import (
    BeforeRequest,
    OnChunkDone,
    OutgoingPush,
    PreparedPush,
    PushOutcome,
    ReceiptOutcome,
)
from shared.expo.transport import detail_error
from shared.settings import ExpoSettings

log = logging.getLogger(__name__)

MAX_RECEIPTS_PER_REQUEST = 1000


_TicketRef = namedtuple("_TicketRef", ["id"])  # what check_receipts_multiple reads
RATE = ErrorCode.MESSAGE_RATE_EXCEEDED.value
# A throttled device is tried again at most this far apart: several tries fit in a deadline of
# seconds to minutes, and a shutting-down consumer waits no longer than this for a round.
THROTTLE_BACKOFF_CAP_S = 4.0


def _throttled(outcome: PushOutcome) -> bool:
    """A push Expo refused for its device's rate (sent again after a back-off)."""
    return not outcome.ok and outcome.attempts > 0 and meaning(outcome.code).resend is Resend.PUSH


def _gave_up(outcome: PushOutcome, seconds: float) -> PushOutcome:
    """The final outcome of a throttled push whose deadline came."""
    tries = outcome.attempts
    note = (
        f"; retried {tries - 1} time(s) over {seconds:.1f} s, still throttled at its deadline"
        if tries > 1
        else "; not retried: no time left before its deadline"
    )
    return dataclasses.replace(outcome, message=f"{outcome.message}{note}")


def _plus(outcome: PushOutcome, earlier: PushOutcome | int) -> PushOutcome:
    """``outcome`` counting the requests an earlier try of the same push made."""
    n = earlier if isinstance(earlier, int) else earlier.attempts
    return dataclasses.replace(outcome, attempts=outcome.attempts + n)


# One push ready to go: its index in the caller's list, the push, and the SDK message.
_Ready = tuple[int, OutgoingPush, SdkMessage]


class ExpoSender(ExpoCalls):
    """Sends pushes through Expo (or the fake) and fetches receipts; never raises per message.

    ``on_event(name, fields)`` is told about ``request`` (kind, count, status, seconds,
    attempt), ``http_429`` (kind, count, attempt), ``retry`` (kind, attempt, delay_s, reason),
    ``throttle`` (count, wait_s), ``chunk_failed`` (kind, count, error), ``split`` (count,
    projects) and ``project_error`` (kind, code, count: a project-level error, the alert); it is
    for metrics and its exceptions are logged and swallowed.

    What each Expo error does is its row in ``shared.domain.outcomes.EXPO_ERRORS``: a whole
    request is sent again after a 429, a 5xx or a network error that never reached Expo
    (``classify``); a request refused for mixing projects (``PUSH_TOO_MANY_EXPERIENCE_IDS``) is
    sent again split by project as Expo's ``details`` say; a push Expo throttled for its device
    (``MessageRateExceeded``) is sent again alone, after a back-off, until its caller's deadline
    (``send(retry_within_s=...)``). Nothing Expo accepted is ever sent again.
    """

    def __init__(self, settings: ExpoSettings, **kwargs: Any) -> None:
        """``kwargs``: see ``ExpoCalls`` (events, back-off, rate share, throttle window)."""
        super().__init__(settings, **kwargs)
        self._pool = ThreadPoolExecutor(settings.concurrency, thread_name_prefix="expo-send")

    # -- public API --------------------------------------------------------------------------
    def send(
        self,
        pushes: Sequence[OutgoingPush | PreparedPush],
        on_chunk_done: OnChunkDone | None = None,
        before_request: BeforeRequest | None = None,
        *,
        retry_within_s: float | None = None,
    ) -> list[PushOutcome]:
        """Send ``pushes``; return one outcome per push, in the same order.

        Pushes go in chunks of 100, each prepared and sent by a worker thread. A push refused
        before sending (bad token, payload too big: ``attempts == 0``) is reported with its
        chunk. Each chunk's outcomes go to ``on_chunk_done`` as soon as its request returns, one
        call at a time (from a worker thread), so tickets can be recorded before anything else
        can fail. If ``on_chunk_done`` raises, chunks not yet started are not sent and the error
        is re-raised here once the requests in flight have finished.

        A push whose ticket says ``MessageRateExceeded`` (Expo throttling that one device) is
        held back: once the first pass is done, the throttled pushes are sent again together,
        after an exponential back-off, until none is throttled or ``retry_within_s`` seconds
        from now (default: ``throttle_window_s``) have passed; only then does its outcome go to
        ``on_chunk_done``. Every request, these too, is announced to ``before_request`` first.
        A throttled push was refused, not accepted, so sending it again is never a duplicate.
        """
        if self._closed:
            raise RuntimeError("ExpoSender is closed")
        window = self._throttle_window_s if retry_within_s is None else retry_within_s
        started = time.monotonic()
        deadline = started + max(0.0, window)
        results: list[PushOutcome | None] = [None] * len(pushes)
        callback_lock = threading.Lock()
        throttled: list[tuple[_Ready, PushOutcome]] = []

        def deliver(items: list[tuple[int, PushOutcome]], ready: list[_Ready]) -> None:
            by_index = {r[0]: r for r in ready}
            final: list[tuple[int, PushOutcome]] = []
            for index, outcome in items:
                if _throttled(outcome):
                    if index in by_index and time.monotonic() < deadline and not self._closed:
                        with callback_lock:
                            throttled.append((by_index[index], outcome))
                        continue
                    outcome = _gave_up(outcome, time.monotonic() - started)
                final.append((index, outcome))
            for index, outcome in final:
                results[index] = outcome
            if on_chunk_done is not None and final:
                with callback_lock:
                    on_chunk_done([outcome for _, outcome in final])

        indexed = list(enumerate(pushes))
        step = MAX_MESSAGES_PER_REQUEST
        self._run(
            [
                self._pool.submit(self._send_chunk, indexed[i : i + step], deliver, before_request)
                for i in range(0, len(indexed), step)
            ]
        )
        attempt = 0
        while throttled:
            attempt += 1
            left = deadline - time.monotonic()
            delay = self._backoff_delay(attempt, THROTTLE_BACKOFF_CAP_S)
            if left <= 0 or self._closed:
                last = [(r[0], o) for r, o in throttled]
                throttled.clear()
                deliver(last, [])
                break
            self._emit("retry", kind="throttled", attempt=attempt, delay_s=delay, reason=RATE)
            log.info(
                "expo: %d push(es) throttled by Expo (%s); again in %.2fs",
                len(throttled),
                RATE,
                min(delay, left),
            )
            self._sleep(min(delay, left))
            if self._closed:  # closed meanwhile: no pool to send with; the next turn gives up
                continue
            again, before = [r for r, _ in throttled], {r[0]: o for r, o in throttled}
            throttled.clear()

            def resend(ready: list[_Ready], before: dict[int, PushOutcome] = before) -> None:
                outcomes = self._publish(ready, before_request)
                deliver([(i, _plus(o, before[i])) for i, o in outcomes], ready)

            self._run(
                [self._pool.submit(resend, again[i : i + step]) for i in range(0, len(again), step)]
            )
        return [outcome for outcome in results if outcome is not None]

    @staticmethod
    def _run(futures: list[Future[None]]) -> None:
        """Wait for ``futures``; on the first error cancel what has not started, let the
        requests in flight finish, and re-raise it."""
        _, pending = wait(futures, return_when=FIRST_EXCEPTION)
        if pending:  # a callback (or a bug) raised: send nothing more, let in-flight finish
            for future in pending:
                future.cancel()
            wait(pending)
        for future in futures:
            error = None if future.cancelled() else future.exception()
            if error is not None:
                raise error

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
            if isinstance(result, CallFailure):
                error = PermanentError if result.permanent else TransientError
                raise error(f"getReceipts failed: {result.error}: {result.message}")
            receipts, _ = result
            asked = set(chunk)
            project_errors: Counter[ErrorCode] = Counter()
            for receipt in receipts:
                if receipt.id not in asked:
                    continue
                ok = receipt.status == "ok"
                outcome = ReceiptOutcome(
                    ticket_id=receipt.id,
                    ok=ok,
                    error=None if ok else detail_error(receipt.details),
                    message=receipt.message or "",
                )
                found[receipt.id] = outcome
                if is_project_level(outcome.code) and outcome.code is not None:
                    project_errors[outcome.code] += 1
            self._project_errors("receipts", project_errors)
        return found

    def close(self) -> None:
        """Wait for requests in flight, then close the connections."""
        self._closed = True
        self._pool.shutdown(wait=True)
        self._close_sessions()

    def __enter__(self) -> ExpoSender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------
    def _send_chunk(
        self,
        chunk: list[tuple[int, OutgoingPush | PreparedPush]],
        deliver: Callable[[list[tuple[int, PushOutcome]], list[_Ready]], None],
        before_request: BeforeRequest | None = None,
    ) -> None:
        outcomes: list[tuple[int, PushOutcome]] = []
        ready: list[_Ready] = []
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
            outcomes.extend(self._publish(ready, before_request))
            outcomes.sort(key=lambda item: item[0])
        deliver(outcomes, ready)

    def _publish(
        self, ready: list[_Ready], before_request: BeforeRequest | None, *, split: bool = True
    ) -> list[tuple[int, PushOutcome]]:
        """One request for ``ready`` (with its retries); one outcome per push, in order."""
        messages = [message for _, _, message in ready]
        first: Callable[[], None] | None = None
        if before_request is not None:
            ids = [push.message_id for _, push, _ in ready]

            def first() -> None:
                # Told which messages may leave from now on (the caller's crash record),
                # after the rate limiter let the request go: a request waiting its turn
                # when the process dies was certainly not sent.
                before_request(ids)

        result = self._with_retries(
            "send",
            len(messages),
            lambda client: client._publish_internal(messages),
            charge=True,
            before_first=first,
        )
        outcomes: list[tuple[int, PushOutcome]] = []
        if isinstance(result, CallFailure):
            if split and result.projects and meaning(result.code).resend is Resend.SPLIT:
                return self._split(ready, result, before_request)
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
        project_errors: Counter[ErrorCode] = Counter()
        for (index, push, _), ticket in zip(ready, tickets, strict=True):
            if ticket.status == "ok" and ticket.id:
                outcome = PushOutcome(push.message_id, True, ticket.id, None, "", attempts)
            else:
                error = detail_error(ticket.details)
                text = ticket.message or error
                code = ErrorCode.of_push(error)
                outcome = PushOutcome(push.message_id, False, None, error, text, attempts, code)
                if is_project_level(code):
                    project_errors[code] += 1
            outcomes.append((index, outcome))
        self._project_errors("send", project_errors)
        return outcomes

    def _split(
        self, ready: list[_Ready], refused: CallFailure, before_request: BeforeRequest | None
    ) -> list[tuple[int, PushOutcome]]:
        """``PUSH_TOO_MANY_EXPERIENCE_IDS``: Expo refused the whole request (nothing was taken)
        and named each project's tokens; send one request per project (tokens it did not name
        together). A part refused again fails: it is not split twice."""
        project_of = {t: p for p, tokens in (refused.projects or {}).items() for t in tokens}
        groups: dict[str, list[_Ready]] = {}
        for item in ready:
            groups.setdefault(project_of.get(item[2].to, ""), []).append(item)
        names = ", ".join(sorted(p or "(not named)" for p in groups))
        log.warning("expo: a request mixed %d projects (%s): one request each", len(groups), names)
        self._emit("split", count=len(ready), projects=len(groups))
        out: list[tuple[int, PushOutcome]] = []
        for group in groups.values():
            for index, outcome in self._publish(group, before_request, split=False):
                out.append((index, _plus(outcome, refused.attempts)))
        return sorted(out, key=lambda item: item[0])
