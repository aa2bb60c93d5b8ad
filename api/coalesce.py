"""Logins that arrive together are written together: one bulk round trip for all of them.

Every write costs the database here a commit (about 10 ms with its log synced on commit), and
concurrent writers queue for it: 20 clients each logging in one device at a time wait for 20
commits in turn. ``Coalescer`` hands each request's item to one worker thread, which takes
everything waiting (up to ``max_batch``) and applies it in one call (``creator.writers.batch``),
so a burst of logins pays a few commits in all. A lone request is applied at once (no waiting for
company); each caller gets its own outcome, or its own exception: never a batch-mate's bug, and
never a wait without end. A caller awaits its future on the event loop (``asyncio.wrap_future``):
one that stops waiting before its item is taken is not applied, and does not stop the others.
At most ``max_waiting`` items wait (``TZPUSH_API__LOGIN_QUEUE``): past it a login is refused at
once with ``Overloaded`` (503 with ``Retry-After``) rather than queued behind a slow
database for longer than its client waits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

from pymongo.errors import ConnectionFailure

from shared.errors import Overloaded, TzpushError

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741


class Coalescer(Generic[I, O]):
    def __init__(
        self,
        apply: Callable[[Sequence[I]], Sequence[O]],
        *,
        max_batch: int = 200,
        max_waiting: int = 1000,
        name: str,
    ) -> None:
        self._apply = apply
        self._max = max_batch
        self._max_waiting = max_waiting
        self._queue: list[tuple[I, Future[O]]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: I) -> Future[O]:
        future: Future[O] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the API is stopping")
            if len(self._queue) >= self._max_waiting:
                # Callers that went away (timed out behind a slow database) do not count.
                self._queue = [(i, f) for i, f in self._queue if not f.cancelled()]
            if len(self._queue) >= self._max_waiting:
                raise Overloaded(
                    f"{len(self._queue)} logins are waiting to be written already; "
                    "try again in a second"
                )
            self._queue.append((item, future))
            self._cond.notify()
        return future

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                batch, self._queue = self._queue[: self._max], self._queue[self._max :]
            # A caller that stopped waiting (its request cancelled) is dropped before its item
            # is applied; the others' futures can no longer be cancelled: they are applied.
            batch = [(item, f) for item, f in batch if f.set_running_or_notify_cancel()]
            if batch:
                self._settle(batch)

    def _settle(self, batch: list[tuple[I, Future[O]]]) -> None:
        """Answer every future of ``batch``, whatever happens: a caller never waits forever.

        If the call fails for the batch with a bug (one item's, or a broken contract), each item
        is applied alone, so only the item that fails gets the exception, not its batch-mates.
        An outage (the database away) fails them all at once: alone, each would wait for it."""
        try:
            outcomes = list(self._apply([item for item, _ in batch]))
            if len(outcomes) != len(batch):
                raise RuntimeError(f"{len(outcomes)} outcomes for {len(batch)} items")
        except BaseException as exc:
            if len(batch) > 1 and _a_bug(exc):
                log.exception("%d coalesced items failed together; applying each alone", len(batch))
                for one in batch:
                    self._settle([one])
                return
            for _, future in batch:
                future.set_exception(exc)
            return
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            future.set_result(outcome)


def _a_bug(exc: BaseException) -> bool:
    """Whether applying items alone may help: not for an outage, nor for a process stopping."""
    return isinstance(exc, Exception) and not isinstance(exc, (TzpushError, ConnectionFailure))
