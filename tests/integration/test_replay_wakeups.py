"""A replay's wake-up at the consumers: taken over once, whatever delivers it twice; a consumer
that dies while sending a replay leaves what may have left ``failed`` "outcome unknown" and the
rest back to ``is_missed`` once the lease runs out, so the next replay never sends twice."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable

import pytest

from creator import janitor
from creator.janitor import sweep
from ops.replay import Replayer, Selection, queue, select
from shared import replaying
from shared.clock import utcnow
from shared.domain.plan import to_item
from shared.errors import TransientError
from shared.expo.sender import ExpoSender
from shared.replaying import send_replay
from shared.store import db as dbm
from shared.store.mongo import creator_stores
from shared.wire import WakeUp
from tests.integration.ops_helpers import missed, run_cli
from tests.integration.test_replay_recovery import DiesAfterRequest

UNKNOWN = "outcome unknown"


def _pushed(world) -> Counter[str]:
    return Counter(p["data"]["messageId"] for p in world.fake.pushes())


def _wakeup_of(world, ids: list[str], run: str) -> WakeUp:
    """A replay's wake-up naming ``ids`` of ``run``, as ``ops.replay.queue`` builds one."""
    items = tuple(to_item(world.message(i)) for i in ids)
    return WakeUp(f"{run}:copy", "safety", int(utcnow().timestamp() * 1000), items, replay=run)


def test_a_replay_wakeup_delivered_twice_to_two_consumers_sends_each_message_once(world):
    uids = [f"w{i}" for i in range(6)]
    for u in uids:
        world.user(u, "Europe/Berlin")
    ids = missed(world, uids)
    publisher = world.planner().wakeups
    counts = queue(
        world.db,
        world.settings,
        publisher,
        select(world.db, Selection()),
        by="api:oncall",
        reason="INC-32",
        selection=Selection(),
    )
    assert counts == Counter({"queued": 6})
    assert set(world.statuses(ids).values()) == {"replaying"}
    assert world.fake.pushes() == []  # taking and queueing sends nothing
    run = world.message(ids[0])["replay"]["run"]
    publisher.send([_wakeup_of(world, ids, run)])  # a second copy, as a redelivery brings it
    publisher.finish(1)
    consumers = [world.start_consumer(burst=True), world.start_consumer(burst=True)]
    for c in consumers:
        c.join()
    assert set(world.statuses(ids).values()) == {"success"}
    assert _pushed(world) == Counter({i: 1 for i in ids})
    m = world.message(ids[0])
    assert m["replay"]["by"] == "api:oncall" and m["replay"]["reason"] == "INC-32"
    assert m["replay"]["sender"].startswith(run + ">consumer-")


def test_a_consumer_killed_while_sending_a_replay_is_settled_by_the_janitor_never_resent(
    world, monkeypatch
):
    uids = [f"k{i}" for i in range(4)]
    for u in uids:
        world.user(u, "UTC")
    ids = missed(world, uids)
    taker = Replayer(world.db, world.settings, None, "api:oncall", "INC-32")  # type: ignore[arg-type]
    taken = taker.take(select(world.db, Selection()))
    assert len(taken) == 4
    wake = _wakeup_of(world, ids, taker.run_id)
    # SIGKILL of the consumer: none of its clean-up runs. Its clock is an hour behind, so its
    # lease on what it took over ran out long ago.
    monkeypatch.setattr(replaying.Replayer, "_stop", lambda self, error: None)
    hour_ago: Callable[[], dt.datetime] = lambda: utcnow() - dt.timedelta(hours=1)  # noqa: E731
    with ExpoSender(world.settings.expo) as real, pytest.raises(ConnectionError):
        send_replay(world.db, world.settings, DiesAfterRequest(real, 1), wake, "c1", hour_ago)
    assert set(world.statuses(ids).values()) == {"replaying"}
    (left,) = _pushed(world)
    monkeypatch.setattr(janitor, "_replays_checked", {}, raising=False)
    sweep(creator_stores(world.db).pending, world.settings, utcnow())
    after = world.statuses(ids)
    assert after[left] == "failed" and UNKNOWN in world.message(left)["reason"], after
    assert {after[i] for i in ids if i != left} == {"is_missed"}, after
    # The copy of the wake-up the broker redelivers finds nothing held by the run: no push.
    with ExpoSender(world.settings.expo) as sender:
        assert send_replay(world.db, world.settings, sender, wake, "c2") == Counter()
    assert run_cli(world.settings, "replay", "--yes") == 0
    assert _pushed(world) == Counter({i: 1 for i in ids})


class BrokerDown:
    """A wake-up publisher whose broker refuses every send."""

    def send(self, wakeups: list[WakeUp], progress: object = None) -> list[WakeUp]:
        raise TransientError("broker connection lost")

    def finish(self, armed: int) -> None:
        raise AssertionError("nothing was sent to confirm")


def test_a_replay_the_broker_refuses_gives_every_message_back_and_sends_nothing(world):
    uids = [f"b{i}" for i in range(3)]
    for u in uids:
        world.user(u, "UTC")
    ids = missed(world, uids)
    with pytest.raises(TransientError):
        queue(
            world.db,
            world.settings,
            BrokerDown(),  # type: ignore[arg-type]
            select(world.db, Selection()),
            by="api:oncall",
            reason="INC-32",
            selection=Selection(),
        )
    assert set(world.statuses(ids).values()) == {"is_missed"}
    assert world.fake.pushes() == []
    assert run_cli(world.settings, "replay", "--yes") == 0  # the next replay takes them all
    assert _pushed(world) == Counter({i: 1 for i in ids})


def test_a_message_no_consumer_would_decode_is_left_and_the_others_are_queued(world):
    uids = ["g1", "g2"]
    for u in uids:
        world.user(u, "UTC")
    good, bad = missed(world, uids)
    world.db[dbm.MESSAGES].update_one({"_id": bad}, {"$set": {"timezone": "Not/AZone"}})
    counts = queue(
        world.db,
        world.settings,
        world.planner().wakeups,
        select(world.db, Selection()),
        by="api:oncall",
        reason="INC-32",
        selection=Selection(),
    )
    assert counts == Counter({"queued": 1, "left is_missed (malformed document)": 1})
    assert world.statuses([good, bad]) == {good: "replaying", bad: "is_missed"}
    assert "tz is not an IANA time zone" in world.message(bad)["replay"]["leftMissed"]
    world.start_consumer(burst=True).join()
    assert world.statuses([good, bad]) == {good: "success", bad: "is_missed"}
    assert _pushed(world) == Counter({good: 1})
