"""Issue 14, "never twice" and "never lost" inside one consumer: the paths the drills do not walk.

- The broker connection is lost while a due group is between its final check and its request:
  the frame goes to another consumer, and the first one must not send what it no longer holds.
- A consumer stops (SIGTERM's path) after sending but before its outcomes are merged: the
  guards of what was sent must stay, so the redelivered frame cannot send it again.
- The database goes away at the due instant (longer than the driver's server selection timeout):
  the final check is retried inside the grace window and the wake-up finishes; nothing is left
  guarded and pending.

Each test injects the fault at the exact step (a gate in the consumer's own code path, a real
kill of the database server) and counts pushes at the Expo fake.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from shared.clock import utcnow
from shared.domain.plan import group_wakeups
from shared.errors import TransientError
from shared.store import db as dbm
from tests.integration.consumer_support import (
    arm,
    guarded,
    herd,
    ids_of,
    in_seconds,
    pushes_by_message,
    set_graces,
    status_counts,
    terminal,
)
from tests.integration.harness import World, wait_for


def _each_once(world: World, n: int) -> None:
    pushes = pushes_by_message(world)
    twice = {m: c for m, c in pushes.items() if c > 1}
    assert not twice, f"pushed more than once: {len(twice)} messages, e.g. {next(iter(twice))}"
    assert len(pushes) == n, f"{len(pushes)} of {n} messages pushed"


def _gate(obj: Any, name: str) -> tuple[threading.Event, threading.Event]:
    """Make ``obj.name`` stop at its start until released: (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    real: Callable[..., Any] = getattr(obj, name)

    def gated(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(60)
        return real(*args, **kwargs)

    setattr(obj, name, gated)
    return entered, release


def _unreachable(*_: Any, **__: Any) -> Any:
    raise TransientError("broker unreachable from this consumer (test partition)")


def test_broker_lost_during_the_final_check_pushes_each_message_once(world):
    n = 30
    docs = herd(world, n, in_seconds(5), prefix="bl")
    a = world.start_consumer(consumer_id="cons-a").consumer
    entered, release = _gate(a.checks, "recent_changes")  # the final check's first database read
    finished = threading.Event()
    real_send = a.dispatch.send

    def send(*args: Any) -> None:
        try:
            real_send(*args)
        finally:
            finished.set()

    a.dispatch.send = send  # type: ignore[method-assign]
    arm(world, docs)
    wait_for(entered.is_set, 20, what="consumer A in the final check of its due group")
    # A loses the broker (and cannot reconnect): the broker gives the frame to B.
    a._client_factory = _unreachable
    assert a.link.client is not None
    a.link.client.close()
    world.start_consumer(consumer_id="cons-b")
    wait_for(lambda: terminal(world, n), 30, what="B to send the redelivered wake-up")
    release.set()  # A's due group goes on from its final check
    wait_for(finished.is_set, 20, what="A's due group to return")
    _each_once(world, n)
    assert status_counts(world) == {"success": n}


def test_shutdown_keeps_the_guards_of_what_was_sent_but_not_merged(world):
    n = 40
    docs = herd(world, n, in_seconds(4), prefix="sd")
    running = world.start_consumer(consumer_id="cons-a")
    a = running.consumer
    merging, release = _gate(a.recorder, "_merge")  # outcomes journaled, never merged
    arm(world, docs)
    wait_for(lambda: len(world.fake.pushes()) >= n, 20, what="A to send the due group")
    wait_for(merging.is_set, 20, what="A's recorder to start merging")
    try:
        running.stop(timeout=20)  # the SIGTERM path: _shutdown, then the broker session closes
        world.start_consumer(consumer_id="cons-b")  # gets the redelivered frame
        wait_for(lambda: terminal(world, n), 30, what="every message to end")
    finally:
        release.set()
    _each_once(world, n)
    assert status_counts(world) == {"success": n}


def test_database_down_at_the_due_instant_still_sends_within_grace(world, stack):
    set_graces(world, meal=120)
    n = 60
    due = in_seconds(6)
    docs = herd(world, n, due, prefix="db")
    world.start_consumer(consumer_id="cons-a")
    arm(world, docs)
    wait_for(lambda: guarded(world, ids_of(docs)), 20, what="the consumer to take the herd")
    # The fault covers the due instant: after preparation, through the final check. It lasts
    # longer than the driver's own patience (its server selection timeout), so the consumer's
    # code sees the errors, not just a slow answer.
    time.sleep(max(0.0, (due - utcnow()).total_seconds() - 0.5))
    stack.kill9("mongo")
    patience_ms = world.db.client.options.server_selection_timeout * 1000
    time.sleep(patience_ms / 1000 + 2)
    stack.start("mongo")
    wait_for(lambda: terminal(world, n), 60, what="every message to end after the restart")
    _each_once(world, n)
    assert status_counts(world) == {"success": n}


def test_a_second_copy_marked_for_takeover_does_not_take_over_from_a_live_holder(world):
    """Two copies of one wake-up reach the same consumer, the second marked for takeover (a
    rebuild run while the first was still on the broker): the consumer holding the first copy
    must not take its own guard over for the second and send twice."""
    n = 20
    docs = herd(world, n, in_seconds(5), prefix="cp")
    world.start_consumer(consumer_id="cons-a")
    arm(world, docs)
    wait_for(lambda: guarded(world, ids_of(docs)), 20, what="the consumer to take the herd")
    c = world.settings.creator
    copies = group_wakeups(
        docs,
        size=c.wakeup_size,
        window_s=world.settings.wakeup.window_seconds,
        planned_at=utcnow(),
        takeover=True,
    )
    broker = world.broker()
    for w in copies:
        broker.send(world.settings.queue(w.category), w.encode())
    broker.flush()
    wait_for(lambda: terminal(world, n), 30, what="every message to end")
    _each_once(world, n)


def test_a_holder_fenced_by_a_takeover_sends_nothing_more(world):
    """A loses its broker session after its due group passed the given-back check, just before
    its attempt record: B takes the redelivered frame over (fencing A first) and sends; A then
    writes its record, finds its fence and sends nothing, and stops."""
    n = 25
    docs = herd(world, n, in_seconds(5), prefix="fe")
    running = world.start_consumer(consumer_id="cons-a")
    a = running.consumer
    entered, release = _gate(a.attempts, "mark")  # after the given-back check, before the record
    arm(world, docs)
    wait_for(entered.is_set, 20, what="A about to record its first request")
    a._client_factory = _unreachable
    assert a.link.client is not None
    a.link.client.close()
    world.start_consumer(consumer_id="cons-b")
    wait_for(lambda: terminal(world, n), 30, what="B to send the redelivered wake-up")
    release.set()
    running.thread.join(30)  # A's due group goes on, then A stops (or not, if unfenced)
    _each_once(world, n)
    assert status_counts(world) == {"success": n}
    assert not running.thread.is_alive(), "a fenced consumer stops"
    assert running.result == [1] and a.fenced


def test_a_bug_in_the_final_check_releases_the_guards_and_parks_the_wakeup(world):
    """A non-database exception at the due instant (a bug): nothing of that due group leaves,
    its guards are released (nothing stays taken by a consumer that will not send), the wake-up
    goes to the dead-letter queue, and the consumer goes on with the next one."""
    n = 10
    docs = herd(world, n, in_seconds(4), prefix="bug")
    a = world.start_consumer(consumer_id="cons-a").consumer
    calls = {"n": 0}
    real = a.checks.recent_changes

    def broken() -> set[str]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("injected bug")
        return real()

    a.checks.recent_changes = broken  # type: ignore[method-assign]
    arm(world, docs)
    wait_for(lambda: calls["n"] >= 1, 20, what="the final check")
    wait_for(lambda: world.db[dbm.SENDS].count_documents({}) == 0, 10, what="guards released")
    assert world.fake.pushes() == []
    after = herd(world, 5, in_seconds(3), prefix="next")
    arm(world, after)
    wait_for(lambda: status_counts(world).get("success", 0) == 5, 20, what="the next wake-up")
