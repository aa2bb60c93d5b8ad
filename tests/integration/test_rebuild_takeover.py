"""Issue 14, rebuild after a broker store loss: the wake-ups it re-arms can take over the guards of
a consumer that stopped (as a redelivered frame would), never those of a consumer that may still
be running; and it streams the pending messages chunk by chunk instead of loading them all."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pytest
from pymongo import monitoring

import creator.rearm as planner_mod
from creator.planner import Planner
from shared.clock import utcnow
from shared.domain.plan import group_wakeups
from shared.store import db as dbm
from shared.wire import decode
from tests.integration.harness import MessageReads, World
from tests.integration.ops_helpers import run_cli

DEAD = "consumer-dead0001"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
FAR = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)


def _pushes_by_message(world: World) -> Counter[str]:
    return Counter(p["data"]["messageId"] for p in world.fake.pushes())


def test_rebuild_takes_over_the_guards_of_a_stopped_consumer(world: World, capsys: Any) -> None:
    m = world.manager()
    for uid in ("held", "tried", "free"):
        world.user(uid, "Europe/Berlin", manager=m)
    due = (utcnow() - dt.timedelta(seconds=200)).replace(microsecond=0)  # within grace (900 s)
    # The broker lost its store: the wake-ups are gone (never armed here).
    docs = world.due_messages(["held", "tried", "free"], due, arm=False)
    ids = {d["userId"]: d["_id"] for d in docs}
    # The consumer that took "held" and "tried" died: its guards remain, and its attempt record
    # says the request for "tried" may have left (it must not be sent again).
    at = due - dt.timedelta(seconds=2)
    world.db[dbm.SENDS].insert_many(
        [{"_id": ids[u], "owner": DEAD, "wakeup": "lost", "at": at} for u in ("held", "tried")]
    )
    world.db[dbm.ATTEMPTS].insert_one(
        {"_id": f"{DEAD}:rec", "consumer": DEAD, "at": due, "ids": [ids["tried"]]}
    )

    assert run_cli(world.settings, "rebuild") == 0
    assert "re-armed 3 pending message(s)" in capsys.readouterr().out
    rc = world.start_consumer(burst=True)
    rc.join(60)
    statuses = world.statuses(list(ids.values()))
    assert statuses == {ids["held"]: "success", ids["tried"]: "failed", ids["free"]: "success"}
    assert _pushes_by_message(world) == {ids["held"]: 1, ids["free"]: 1}
    assert "outcome unknown" in world.message(ids["tried"])["reason"]
    guard = world.db[dbm.SENDS].find_one({"_id": ids["held"]})
    assert guard is not None
    assert (guard["owner"], guard.get("takenOverFrom")) == (rc.consumer.cid, DEAD)

    # Rebuilding again re-arms nothing: every message has ended.
    assert run_cli(world.settings, "rebuild") == 0
    assert "re-armed 0 pending message(s)" in capsys.readouterr().out


def test_rebuild_leaves_a_holder_that_may_still_be_running_alone(world: World) -> None:
    """A guard taken a moment ago may belong to a live consumer about to send: no takeover."""
    world.user("busy", "UTC")
    due = (utcnow() - dt.timedelta(seconds=200)).replace(microsecond=0)
    docs = world.due_messages(["busy"], due, arm=False)
    mid = docs[0]["_id"]
    live = "consumer-live0001"
    world.db[dbm.SENDS].insert_one({"_id": mid, "owner": live, "wakeup": "w", "at": utcnow()})

    assert run_cli(world.settings, "rebuild") == 0
    rc = world.start_consumer(burst=True)
    rc.join(60)
    assert world.fake.pushes() == []
    assert world.statuses([mid]) == {mid: "pending"}
    guard = world.db[dbm.SENDS].find_one({"_id": mid})
    assert guard is not None and guard["owner"] == live and "takenOverFrom" not in guard


def test_rebuild_streams_pending_messages_chunk_by_chunk(
    world: World, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read with a cursor in due order, armed chunk by chunk: what is read and not yet armed
    never exceeds a chunk plus one open wake-up per category; wake-ups stay full across chunk
    boundaries (the same wake-ups as grouping everything at once)."""
    chunk, size = 7, 5
    settings = world.settings.model_copy(
        update={"creator": world.settings.creator.model_copy(update={"wakeup_size": size})}
    )
    world.settings = settings
    m = world.manager()
    base = (utcnow() + dt.timedelta(hours=1)).replace(microsecond=0)
    docs = []
    for n in range(20):
        world.user(f"s{n}", "UTC", manager=m)
        for k, cat in enumerate(("meal", "mood")):
            at = base + dt.timedelta(seconds=6 * n + 3 * k)  # distinct instants, interleaved
            docs += world.due_messages([f"s{n}"], at, category=cat, label=cat, arm=False)
    assert len(docs) == 40

    monkeypatch.setattr(planner_mod, "REARM_CHUNK", chunk, raising=False)
    events: list[tuple[str, int]] = []
    client = stack.mongo_client(event_listeners=[MessageReads(events)])
    armed: list[tuple[str, ...]] = []
    try:
        planner = Planner(client[settings.mongo.database], world.broker(), settings)
        assert planner.broker is not None
        send = planner.broker.send

        def spy_send(destination: str, body: bytes, **kw: Any) -> Any:
            items = decode(body).items
            armed.append(tuple(i.id for i in items))
            events.append(("armed", len(items)))
            return send(destination, body, **kw)

        monkeypatch.setattr(planner.broker, "send", spy_send)
        progress: list[int] = []
        n = planner.rearm(EPOCH, FAR, progress=progress.append)
    finally:
        client.close()

    assert n.messages == 40 and sum(progress) == 40
    reads = [k for e, k in events if e == "read"]
    assert sum(reads) == 40 and max(reads) <= chunk, events
    read = published = most_held = 0
    for kind, k in events:
        if kind == "read":
            read += k
        else:
            published += k
            most_held = max(most_held, read - published + k)
    # Held at once: the chunk being armed plus at most size - 1 carried per category.
    assert most_held <= chunk + 2 * (size - 1), events
    assert Counter(i for w in armed for i in w) == Counter(d["_id"] for d in docs)
    window = settings.wakeup.window_seconds
    whole = group_wakeups(docs, size=size, window_s=window, planned_at=utcnow())
    assert sorted(armed) == sorted(tuple(i.id for i in w.items) for w in whole)


class _DueRanges(monitoring.CommandListener):
    """The due-time range (``scheduledAt`` bounds) of every read and count of the messages."""

    def __init__(self) -> None:
        self.ranges: list[tuple[dt.datetime, dt.datetime]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        cmd = event.command
        flt: Any = None
        if event.command_name == "find" and cmd.get("find") == dbm.MESSAGES:
            flt = cmd.get("filter")
        elif event.command_name == "aggregate" and cmd.get("aggregate") == dbm.MESSAGES:
            flt = next((s["$match"] for s in cmd.get("pipeline", []) if "$match" in s), None)
        if isinstance(flt, dict) and isinstance(flt.get("scheduledAt"), dict):
            rng = flt["scheduledAt"]
            lo = rng.get("$gte", rng.get("$gt", EPOCH))
            hi = rng.get("$lt", rng.get("$lte", FAR))
            self.ranges.append((_aware(lo), _aware(hi)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def _aware(t: dt.datetime) -> dt.datetime:
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def test_rebuild_reads_the_pending_messages_a_slice_of_due_time_at_a_time(
    world: World, stack: Any
) -> None:
    """This server reads a whole index range before it answers even one document (2.9 s for the
    first batch of 50,000 pending, measured), so one read of every pending message passes the
    driver's 30 s timeout at 1M: the rebuild (its count and its reads) asks for slices of due
    time, none holding more than ``REARM_SLICE`` of the pending messages."""
    m = world.manager()
    now = utcnow().replace(microsecond=0)
    docs = []
    for n in range(12):  # every 4 hours from 20 h ago to 24 h ahead
        world.user(f"r{n}", "UTC", manager=m)
        at = now + dt.timedelta(hours=4 * n - 20, minutes=1)
        docs += world.due_messages([f"r{n}"], at, arm=False)
    dues = [d["scheduledAt"] for d in docs]

    listener = _DueRanges()
    client = stack.mongo_client(event_listeners=[listener])
    try:
        planner = Planner(client[world.settings.mongo.database], world.broker(), world.settings)
        counted = planner_mod.count_pending(planner, EPOCH, FAR)
        done = planner.rearm(EPOCH, FAR)
    finally:
        client.close()
    assert counted == done.messages == len(docs)
    assert listener.ranges
    for lo, hi in listener.ranges:
        held = [t for t in dues if lo <= t < hi]
        assert not held or hi - lo <= planner_mod.REARM_SLICE, (lo, hi, len(held))
