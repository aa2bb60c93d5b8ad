"""Issue 34: kill -9 of the active broker of an active/standby pair (two ActiveMQ brokers on one
shared store, `tzpush services up --pair`): the standby takes over, the scheduled wake-ups fire
from the shared store, nothing is lost or sent twice, and a second failover works after the old
active comes back as the new standby.

The pair is this module's own (ports: the test STOMP port + 5 and + 6; its own state dir), the
database the session's. Each drill waits for real due instants (~20 s ahead): the wait is the
scenario, not a synchronisation sleep.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devstack.config import StackConfig
from devstack.stack import LocalStack
from ops.doctor import check_broker
from shared.clock import utcnow
from shared.store import db as dbm
from shared.wire import decode
from tests.integration.conftest import SECANTUS_VENV, TEST_STATE_DIR, TEST_STOMP_PORT, Stack
from tests.integration.consumer_support import (
    arm,
    herd,
    ids_of,
    in_seconds,
    pushes_by_message,
    status_counts,
    terminal,
)
from tests.integration.harness import make_world, wait_for

PAIR_PORTS = (TEST_STOMP_PORT + 5, TEST_STOMP_PORT + 6)
AHEAD_S = 20  # wake-ups scheduled this far ahead of the kill (the bench: 1-2 min)
TAKEOVER_S = 60  # the standby polls the lock every second; a loaded host starts it in ~5 s


@dataclass
class Pair:
    local: LocalStack
    settings: Any

    def kill_active(self) -> tuple[str, int]:
        """SIGKILL whichever broker answers now; (its name, the wall-clock ms of the kill)."""
        active = self.local.active()
        assert active is not None, "no broker of the pair answers"
        at = int(utcnow().timestamp() * 1000)
        self.local.kill9(active)
        return active, at

    def takeover_s(self, killed: str, killed_ms: int) -> float:
        """Waits until the other broker answers; seconds from the kill."""
        other = next(b for b in self.local.config.brokers if b != killed)
        wait_for(lambda: self.local.active() == other, TAKEOVER_S, what=f"{other} takes over")
        return (utcnow().timestamp() * 1000 - killed_ms) / 1000


@pytest.fixture(scope="module")
def pair(stack: Stack) -> Iterator[Pair]:
    endpoints = ",".join(f"127.0.0.1:{p}" for p in PAIR_PORTS)
    # host/port name the first broker too: code that knows one broker only connects there.
    stomp = {"endpoints": endpoints, "port": PAIR_PORTS[0]}
    settings = stack.settings.model_copy(
        update={"stomp": stack.settings.stomp.model_copy(update=stomp)}
    )
    state = TEST_STATE_DIR / "pair"
    shutil.rmtree(state, ignore_errors=True)
    local_settings = settings.model_copy(
        update={"local": settings.local.model_copy(update={"state_dir": str(state)})}
    )
    config = StackConfig.from_settings(local_settings, venv_dir=SECANTUS_VENV)
    local = LocalStack(config, die_with_parent=True)
    try:
        local.up(config.brokers)
        assert local.active() == "activemq" and local.standby("activemq-b")
        yield Pair(local, settings)
    finally:
        for name in reversed(config.brokers):
            local.stop(name)


@pytest.fixture
def pair_world(pair: Pair, db: Any) -> Iterator[Any]:
    with make_world(pair.settings, db) as w:
        yield w


def _first_send_after(world: Any, since_ms: int) -> int | None:
    """The wall-clock ms of the first push the fake received at or after ``since_ms``."""
    return min(
        (p["received_at_ms"] for p in world.fake.pushes() if p["received_at_ms"] >= since_ms),
        default=None,
    )


def _exactly_once(world: Any, docs: list[dict[str, Any]]) -> None:
    ids = ids_of(docs)
    wait_for(lambda: terminal(world, len(ids)), TAKEOVER_S + 30, what="every message terminal")
    assert status_counts(world) == {"success": len(ids)}
    sent = pushes_by_message(world)
    assert sorted(sent) == sorted(ids), "lost: " + str(set(ids) - set(sent))
    assert max(sent.values()) == 1, [m for m, n in sent.items() if n > 1]
    assert world.db[dbm.SENDS].count_documents({}) == len(ids)


def test_scheduled_wakeups_fire_from_the_shared_store_after_two_failovers(
    pair: Pair, pair_world: Any
) -> None:
    world = pair_world
    planner = world.planner()  # a creator's connection: to the first endpoint that answers
    first = herd(world, 40, in_seconds(AHEAD_S), prefix="one")
    arm(world, first, planner)
    world.start_consumer()
    killed, killed_ms = pair.kill_active()
    assert killed == "activemq"
    took = pair.takeover_s(killed, killed_ms)
    _exactly_once(world, first)
    print(f"failover 1: standby active {took:.2f} s after the kill")
    row = check_broker(pair.settings)[0]
    assert row.status == "ok" and f":{PAIR_PORTS[1]} (endpoint 2 of 2" in row.detail, row

    pair.local.start("activemq")  # the old active comes back as the new standby
    assert pair.local.standby("activemq") and pair.local.active() == "activemq-b"
    second = herd(world, 40, in_seconds(AHEAD_S), prefix="two")
    # The same creator: its connection died with a; it reconnects to the one that answers, b.
    arm(world, second, planner)
    assert planner.broker is not None and planner.broker.endpoint == ("127.0.0.1", PAIR_PORTS[1])
    killed, killed_ms = pair.kill_active()
    assert killed == "activemq-b"
    took = pair.takeover_s(killed, killed_ms)
    _exactly_once(world, first + second)
    print(f"failover 2: old active, now standby, active {took:.2f} s after the kill")
    pair.local.start("activemq-b")
    assert pair.local.standby("activemq-b")


def test_a_herd_firing_when_the_active_broker_dies_is_sent_exactly_once(
    pair: Pair, pair_world: Any
) -> None:
    world = pair_world
    due = in_seconds(12)
    docs = herd(world, 300, due, prefix="herd")
    arm(world, docs)
    world.start_consumer()
    # The wake-ups fire `lead` before the due instant and the consumer holds them, unacked,
    # until it: kill the active broker then, with the herd in the consumer's hands.
    lead = world.settings.wakeup.lead_seconds
    fire = due.timestamp() - lead + 0.5
    wait_for(lambda: utcnow().timestamp() >= fire, AHEAD_S, interval=0.02, what="the firing")
    killed, killed_ms = pair.kill_active()
    took = pair.takeover_s(killed, killed_ms)
    before = sum(1 for p in world.fake.pushes() if p["received_at_ms"] <= killed_ms)
    _exactly_once(world, docs)
    assert before == 0, "the herd went out before the kill: the drill missed its moment"
    first = _first_send_after(world, killed_ms)
    assert first is not None
    print(
        f"herd: standby active {took:.2f} s after the kill; first send through it "
        f"{(first - killed_ms) / 1000:.2f} s after the kill"
    )


def test_a_change_made_while_no_broker_answers_is_armed_through_the_new_active_one(
    pair: Pair, pair_world: Any
) -> None:
    """The API's and the creator's side of a switch: a change made while neither broker answers
    is stored and answered as in a broker outage; once the other broker is active, the same
    creator's next pass connects to it and arms what the change planned."""
    from creator.manage import Manager
    from tests.integration.test_creator import drain, fire_at_once

    world = pair_world
    for name in pair.local.config.brokers:  # both up again, whatever the drills before left
        pair.local.start(name)
    planner = world.planner()
    manager = Manager(world.db, planner, world.settings)
    planner.run_pass()  # a planned window: a change plans at once
    world.user("switch", tz="UTC", manager=manager)
    active = pair.local.active()
    other = next(b for b in pair.local.config.brokers if b != active)
    assert active is not None
    pair.local.stop(other)
    pair.local.kill9(active)  # nothing answers now: the switch is under way
    due = (utcnow() + dt.timedelta(hours=3)).strftime("%H:%M")
    manager.add_reminder("switch", category="meal", label="lunch", at=due)
    [planned] = list(world.db[dbm.MESSAGES].find({"userId": "switch"}))
    assert planned["status"] == "pending"

    pair.local.start(other)  # takes the store's lock: the new active broker
    fire_at_once(planner)
    planner.run_pass()
    assert planner.broker is not None
    assert planner.broker.endpoint == pair.local.address(other)
    armed = {i.id for f in drain(world, "meal", 1) for i in decode(f.body).items}
    assert planned["_id"] in armed
    pair.local.start(active)  # back as the standby
    assert pair.local.standby(active)
