"""``api.coalesce.Coalescer``: what a caller that stops waiting does to the others.

A login is awaited on the event loop (``asyncio.wrap_future``): when its request is cancelled
(the client went away, the server is stopping), asyncio cancels the coalescer's future too. The
worker must not die of setting the result of a cancelled future: every later login would wait
forever."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from api.coalesce import Coalescer


class Held:
    """An ``apply`` that records each batch and holds it until ``release`` is set."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.applied: list[list[str]] = []

    def __call__(self, items: Sequence[str]) -> list[str]:
        self.applied.append(list(items))
        self.entered.set()
        assert self.release.wait(10)
        return [f"done {i}" for i in items]


def test_a_caller_that_stopped_waiting_does_not_stop_the_others() -> None:
    held = Held()
    c: Coalescer[str, str] = Coalescer(held, name="test-cancel")
    try:
        first = c.submit("first")
        assert held.entered.wait(10)  # the worker is busy with "first"
        gone = c.submit("gone")  # queued behind it...
        assert gone.cancel()  # ...and its caller stops waiting before it is applied
        kept = c.submit("kept")
        held.release.set()
        assert first.result(10) == "done first"
        assert kept.result(10) == "done kept"
        # The worker is still alive: a later login is answered too.
        assert c.submit("later").result(10) == "done later"
        assert all("gone" not in batch for batch in held.applied), held.applied
    finally:
        c.close()


def test_a_caller_that_stops_waiting_while_its_batch_runs_changes_nothing() -> None:
    held = Held()
    c: Coalescer[str, str] = Coalescer(held, name="test-cancel-running")
    try:
        running = c.submit("running")
        assert held.entered.wait(10)
        assert not running.cancel()  # taken: it is applied whatever the caller does
        held.release.set()
        assert running.result(10) == "done running"
        assert c.submit("next").result(10) == "done next"
    finally:
        c.close()
