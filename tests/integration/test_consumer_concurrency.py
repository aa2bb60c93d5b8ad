"""Issue 5: competing consumers never send one message twice; a 429 storm loses nothing."""

from __future__ import annotations

from shared.store import db as dbm
from tests.integration.consumer_support import (
    arm,
    herd,
    ids_of,
    in_seconds,
    pushes_by_message,
    pushes_by_token,
    set_creator,
    status_counts,
    terminal,
)
from tests.integration.harness import wait_for


def test_two_consumers_on_one_queue_never_send_twice(world):
    n = 500
    set_creator(world, wakeup_size=25)  # 20 wake-ups, so both consumers get some
    docs = herd(world, n, in_seconds(6))
    a = world.start_consumer(consumer_id="consumer-a")
    b = world.start_consumer(consumer_id="consumer-b")
    p = world.planner()
    arm(world, docs, p)
    arm(world, docs, p)  # and every wake-up twice, as two creators racing would

    wait_for(lambda: terminal(world, n), 60, what="all messages terminal")
    a.stop()
    b.stop()
    assert status_counts(world) == {"success": n}
    by_token = pushes_by_token(world)
    assert len(by_token) == n
    assert set(by_token.values()) == {1}, by_token.most_common(3)
    assert set(pushes_by_message(world).values()) == {1}
    senders = {d["consumer"] for d in world.db[dbm.MESSAGES].find({}, {"consumer": 1})}
    assert senders == {"consumer-a", "consumer-b"}  # they really competed


def test_429_storm_is_ridden_out_without_loss(world):
    n = 300
    world.fake.rate_per_second = 50  # the fake's window: 100 at once, then 50/s
    docs = herd(world, n, in_seconds(3))
    world.start_consumer()  # client-side rate is 100000/s: it will overrun the fake
    arm(world, docs)

    wait_for(lambda: terminal(world, n), 60, what="all messages terminal")
    stats = world.fake.stats()
    assert stats["http_429"] > 0, "no storm happened"
    assert status_counts(world) == {"success": n}
    assert set(pushes_by_token(world).values()) == {1}
    assert len(pushes_by_token(world)) == n
    assert set(ids_of(docs)) == set(pushes_by_message(world))
