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


def test_more_logins_waiting_than_the_bound_are_refused_at_once_as_transient() -> None:
    """Nothing else bounds the queue behind a slow database (the per-key rate limit is per key,
    and an awaited login holds no worker thread): past ``max_waiting`` a login is refused at
    once with a ``TransientError`` (the API's 503 with ``Retry-After``), not queued for a wait
    past any client's timeout. Those already waiting are applied; once the queue drains, logins
    are taken again."""
    import pytest

    from shared.errors import TransientError

    held = Held()
    c: Coalescer[str, str] = Coalescer(held, max_waiting=3, name="test-bound")
    try:
        first = c.submit("first")
        assert held.entered.wait(10)  # the worker is busy: the next ones wait
        waiting = [c.submit(f"w{i}") for i in range(3)]
        with pytest.raises(TransientError, match="waiting"):  # Overloaded, a TransientError
            c.submit("one too many")
        held.release.set()
        assert first.result(10) == "done first"
        assert [f.result(10) for f in waiting] == ["done w0", "done w1", "done w2"]
        assert c.submit("later").result(10) == "done later"
    finally:
        c.close()


def test_logins_whose_callers_went_away_do_not_count_against_the_bound() -> None:
    """Clients that time out while the database is slow cancel their futures, which stay in
    the queue until the worker takes and drops them: counted, they filled the bound with
    nobody waiting, and live logins were refused."""
    held = Held()
    c: Coalescer[str, str] = Coalescer(held, max_waiting=3, name="test-bound-cancelled")
    try:
        first = c.submit("first")
        assert held.entered.wait(10)
        gone = [c.submit(f"gone{i}") for i in range(3)]
        assert all(f.cancel() for f in gone)
        live = c.submit("live")  # nobody else is waiting: taken
        held.release.set()
        assert first.result(10) == "done first"
        assert live.result(10) == "done live"
        assert all("gone0" not in batch for batch in held.applied), held.applied
    finally:
        c.close()


def test_a_refused_login_is_a_503_that_says_why() -> None:
    """The API answers the refusal 503 with ``Retry-After`` and its own words (a driver's
    failure keeps the generic text: it may name hosts)."""
    import asyncio
    import json

    from starlette.requests import Request

    from api.problems import on_project_error
    from shared.errors import Overloaded, TransientError

    scope = {"type": "http", "method": "PUT", "path": "/v1/users/u/devices/d", "headers": []}
    said = asyncio.run(on_project_error(Request(scope), Overloaded("1000 logins are waiting")))
    assert said.status_code == 503 and said.headers["retry-after"] == "1"
    assert "1000 logins are waiting" in json.loads(bytes(said.body))["detail"]
    driver = asyncio.run(on_project_error(Request(scope), TransientError("db at 10.0.0.5 down")))
    assert driver.status_code == 503 and "10.0.0.5" not in bytes(driver.body).decode()
