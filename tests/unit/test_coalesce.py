"""``api.coalesce.Coalescer``: what a caller that stops waiting does to the others.

A login is awaited on the event loop (``asyncio.wrap_future``): when its request is cancelled
(the client went away, the server is stopping), asyncio cancels the coalescer's future too. The
worker must not die of setting the result of a cancelled future: every later login would wait
forever."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from api.coalesce import Coalescer


def test_a_caller_that_stopped_waiting_does_not_stop_the_others() -> None:
    entered = threading.Event()
    release = threading.Event()
    applied: list[list[str]] = []

    def apply(items: Sequence[str]) -> list[str]:
        applied.append(list(items))
        if items == ["first"]:
            entered.set()
            assert release.wait(10)
        return [f"done {i}" for i in items]

    c: Coalescer[str, str] = Coalescer(apply, name="test-cancel")
    try:
        first = c.submit("first")
        assert entered.wait(10)  # the worker is busy with "first"
        gone = c.submit("gone")  # queued behind it...
        assert gone.cancel()  # ...and its caller stops waiting before it is applied
        kept = c.submit("kept")
        release.set()
        assert first.result(10) == "done first"
        assert kept.result(10) == "done kept"
        # The worker is still alive: a later login is answered too.
        assert c.submit("later").result(10) == "done later"
        assert all("gone" not in batch for batch in applied), applied
    finally:
        c.close()


def test_a_caller_that_stops_waiting_while_its_batch_runs_changes_nothing() -> None:
    entered = threading.Event()
    release = threading.Event()

    def apply(items: Sequence[str]) -> list[str]:
        entered.set()
        assert release.wait(10)
        return [f"done {i}" for i in items]

    c: Coalescer[str, str] = Coalescer(apply, name="test-cancel-running")
    try:
        running = c.submit("running")
        assert entered.wait(10)
        assert not running.cancel()  # taken: it is applied whatever the caller does
        release.set()
        assert running.result(10) == "done running"
        assert c.submit("next").result(10) == "done next"
    finally:
        c.close()
