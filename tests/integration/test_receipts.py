"""Issue 5: the receipts poller against the Expo fake over real HTTP.

The world's consumers mark receipts due at once (``receipts_delay_s = 0``) and the fake makes
receipts available at once (``receipt_delay_s = 0``), so ``poll_once`` can run right after the
send.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from consumer.receipts import ReceiptPoller
from shared.expo.sender import ExpoSender
from shared.store import db as dbm
from tests.integration.consumer_support import in_seconds
from tests.integration.harness import World, wait_for


@pytest.fixture
def poller(world: World) -> Iterator[ReceiptPoller]:
    sender = ExpoSender(world.settings.expo)
    try:
        yield ReceiptPoller(world.settings, world.db, sender)
    finally:
        sender.close()


def test_ok_receipt_is_recorded(world, poller):
    world.user("fine")
    mid = world.due_messages(["fine"], in_seconds(3))[0]["_id"]
    world.start_consumer()
    wait_for(lambda: world.all_terminal([mid]), 20, what="terminal")

    assert poller.poll_once() == {"ok": 1}
    doc = world.message(mid)
    assert doc["status"] == "success"
    assert doc["receipt"]["state"] == "ok"
    assert poller.poll_once() == {}  # nothing due any more


def test_device_not_registered_at_receipt_deactivates_and_blocks_later_push(world, poller):
    m = world.manager()
    tok = world.user("gone-later", manager=m)
    world.fake.configure(dead_at_receipt=[tok["token"]])
    first = in_seconds(3)
    mid = world.due_messages(["gone-later"], first, label="a", planner=m.planner)[0]["_id"]
    # Planned and armed while the token was still active; due after the receipt is read.
    later = world.due_messages(
        ["gone-later"], first + dt.timedelta(seconds=4), label="b", planner=m.planner
    )[0]["_id"]
    world.start_consumer()
    wait_for(lambda: world.all_terminal([mid]), 20, what="the first message terminal")
    assert world.message(mid)["status"] == "success"  # Expo accepted it: the ticket is ok

    assert poller.poll_once() == {"error:DeviceNotRegistered": 1}
    doc = world.message(mid)
    assert doc["status"] == "failed"
    assert doc["receipt"]["state"] == "error"
    assert doc["receipt"]["error"] == "DeviceNotRegistered"
    assert doc["reason"].startswith("receipt error DeviceNotRegistered")
    t = world.db[dbm.TOKENS].find_one({"_id": tok["_id"]})
    assert t["isActive"] is False
    assert t["deactivationReason"] == "DeviceNotRegistered"
    assert world.message(later)["status"] == "pending"  # the receipt came before its instant

    wait_for(lambda: world.all_terminal([later]), 20, what="the later message terminal")
    blocked = world.message(later)
    assert blocked["status"] == "cancelled"
    assert blocked["reason"] == "token no longer active (DeviceNotRegistered)"
    assert len(world.pushes_to(tok["token"])) == 1  # only the one sent before the receipt
