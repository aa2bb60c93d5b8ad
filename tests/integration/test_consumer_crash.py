"""Issue 5: crashes and stops. A consumer killed mid-batch, a broker killed with armed wake-ups,
a consumer stopped with SIGTERM: every message ends terminal, none is pushed twice.

Consumers that must be killed or signalled run as real processes (``tzpush consumer`` with
``TZPUSH_*`` settings pointing at this test's world); the survivors run in threads.
"""

from __future__ import annotations

import time

from shared.domain.outcomes import journal_entries
from shared.store import db as dbm
from tests.integration.consumer_support import (
    ConsumerProcess,
    arm,
    guarded,
    herd,
    ids_of,
    in_seconds,
    ms,
    pushes_by_message,
    pushes_by_token,
    status_counts,
    terminal,
)
from tests.integration.harness import World, wait_for

UNKNOWN = "outcome unknown"


def _no_duplicate_push(world: World, n_tokens: int) -> None:
    by_token = pushes_by_token(world)
    twice = {t: c for t, c in by_token.items() if c > 1}
    assert not twice, f"tokens pushed more than once: {twice}"
    assert len(by_token) <= n_tokens
    assert all(c == 1 for m, c in pushes_by_message(world).items()), "a message pushed twice"


def test_consumer_killed_mid_batch_and_restarted_ends_all_terminal_without_duplicates(
    world, tmp_path
):
    # One request at a time, each held 1.5 s by the fake: the kill lands while the second
    # chunk of the first due instant is in flight, the first chunk recorded, its last three
    # chunks not started, and the second due instant not attempted yet.
    world.settings = world.settings.model_copy(
        update={"expo": world.settings.expo.model_copy(update={"concurrency": 1})}
    )
    world.fake.configure(latency_ms=1500)
    first = ConsumerProcess(world.settings, tmp_path / "consumer-1.log")
    try:
        first.wait_consuming()
        due1 = in_seconds(3)
        group1 = herd(world, 500, due1, prefix="g1")
        group2 = herd(world, 100, in_seconds(9), prefix="g2")
        arm(world, group1 + group2)  # one wake-up, two due instants
        n = len(group1) + len(group2)

        def recorded() -> int:
            # Outcomes are durable once journaled (one insert per request), merged later.
            journaled = sum(len(journal_entries(d)) for d in world.db[dbm.JOURNAL].find())
            return status_counts(world).get("success", 0) + journaled

        def mid_batch() -> bool:
            return recorded() >= 100 and world.fake.stats()["requests"] >= 2

        wait_for(mid_batch, 30, what="the first chunk recorded and the second in flight")
        first.kill9()
    finally:
        first.close()
    assert recorded() == 100  # mid-batch indeed: one chunk recorded, one in flight

    world.fake.configure(latency_ms=0)
    second = world.start_consumer(consumer_id="consumer-second")
    wait_for(lambda: terminal(world, n), 60, what="every message terminal after the restart")
    second.stop()

    docs = {d["_id"]: d for d in world.db[dbm.MESSAGES].find()}
    g1, g2 = ids_of(group1), ids_of(group2)
    # The second due instant was never attempted by the dead consumer: sent by the new one.
    assert {docs[i]["status"] for i in g2} == {"success"}
    assert {docs[i]["consumer"] for i in g2} == {"consumer-second"}
    # The first: sent and recorded, or in flight at the kill (ended failed, outcome unknown),
    # or never started (attempt records are per request): sent by the new consumer.
    unknown = [i for i in g1 if docs[i]["status"] == "failed"]
    assert all(docs[i]["reason"].startswith(UNKNOWN) for i in unknown)
    assert all(docs[i]["status"] == "success" for i in g1 if i not in unknown)
    assert 0 < len(unknown) <= 100, len(unknown)  # only the chunk that was in flight
    by_second = [i for i in g1 if docs[i].get("consumer") == "consumer-second"]
    assert len(by_second) >= 300, len(by_second)  # the chunks the dead one never started
    _no_duplicate_push(world, n)
    pushed = pushes_by_message(world)
    assert all(pushed[i] == 1 for i in docs if docs[i]["status"] == "success")
    print(f"kill -9 mid-batch: {len(unknown)} outcome unknown, {n - len(unknown)} success")


def test_broker_kill9_and_restart_loses_no_armed_wakeup(world, stack):
    n = 50
    due = in_seconds(8)
    docs = herd(world, n, due)
    consumer = world.start_consumer()
    arm(world, docs)  # wake-ups fire at due - lead (6 s from now): the broker dies first
    stack.kill9("activemq")
    stack.start("activemq")

    wait_for(lambda: terminal(world, n), 90, what="every message terminal after the restart")
    consumer.stop()
    assert status_counts(world) == {"success": n}
    _no_duplicate_push(world, n)
    assert len(pushes_by_token(world)) == n
    assert all(p["received_at_ms"] >= ms(due) for p in world.fake.pushes())


def test_sigterm_stops_taking_work_exits_zero_and_another_consumer_sends_the_rest(world, tmp_path):
    timeout = world.settings.shutdown.timeout_s  # 5 s in the test world
    proc = ConsumerProcess(world.settings, tmp_path / "consumer.log")
    try:
        proc.wait_consuming()
        # Due 5 s after arming: whenever SIGTERM follows, still inside its 5 s shutdown grace.
        soon = herd(world, 20, in_seconds(timeout), prefix="soon")
        # Due well beyond the grace, even when a loaded machine delays the SIGTERM below.
        held = herd(world, 20, in_seconds(3 * timeout + 12), prefix="held")
        arm(world, soon + held)
        wait_for(lambda: guarded(world, ids_of(soon + held)), 15, what="the consumer holding")

        proc.terminate()
        stopped_at = time.monotonic()
        # Fires 2 s after SIGTERM (due - lead) while the process is still finishing ``soon``,
        # and is due inside its grace: had it taken the frame, it would have sent it.
        fresh = herd(world, 10, in_seconds(timeout - 1), prefix="fresh")
        arm(world, fresh)
        rc = proc.wait(timeout + 10)
        took = time.monotonic() - stopped_at
    finally:
        proc.close()
    assert rc == 0, proc.log()
    assert took <= timeout + 1.0, f"exit took {took:.1f} s, shutdown timeout {timeout} s"
    # It finished what fell due within its grace, gave back what it held, took nothing new.
    assert {world.message(i)["status"] for i in ids_of(soon)} == {"success"}
    assert {world.message(i)["status"] for i in ids_of(held + fresh)} == {"pending"}
    assert world.db[dbm.SENDS].count_documents({"_id": {"$in": ids_of(held + fresh)}}) == 0

    after = world.start_consumer(consumer_id="consumer-after")
    n = len(soon) + len(held) + len(fresh)
    wait_for(lambda: terminal(world, n), 30, what="the rest sent by another consumer")
    after.stop()
    assert status_counts(world) == {"success": n}
    for i in ids_of(held + fresh):
        assert world.message(i)["consumer"] == "consumer-after"
    for i in ids_of(soon):
        assert world.message(i)["consumer"] != "consumer-after"
    due_of = {d["_id"]: ms(d["scheduledAt"]) for d in held}
    for p in world.fake.pushes():
        mid = p["data"]["messageId"]
        assert p["received_at_ms"] >= due_of.get(mid, 0)
    _no_duplicate_push(world, n)
    assert len(pushes_by_token(world)) == n
