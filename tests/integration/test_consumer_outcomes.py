"""Issue 5: every terminal status a consumer writes, each by its own test (cancellations are in
test_consumer_cancel.py)."""

from __future__ import annotations

from shared.store import db as dbm
from tests.integration.consumer_support import in_seconds, set_graces, token_of
from tests.integration.harness import wait_for


def test_success_records_ticket_and_pending_receipt(world):
    world.user("ok")
    docs = world.due_messages(["ok"], in_seconds(3))
    mid = docs[0]["_id"]
    world.start_consumer()
    wait_for(lambda: world.all_terminal([mid]), 20, what="terminal")

    doc = world.message(mid)
    assert doc["status"] == "success"
    assert doc["reason"] == "accepted by Expo"
    push = world.pushes_to("ExponentPushToken[ok]")
    assert len(push) == 1
    assert doc["ticketId"] == push[0]["ticket_id"]
    assert doc["receipt"]["state"] == "pending"
    assert doc["attempts"] == 1
    assert world.db[dbm.SENDS].find_one({"_id": mid}) is not None  # the send guard stays


def test_failed_device_not_registered_at_ticket(world):
    world.user("gone")
    token = "ExponentPushToken[gone]"
    world.fake.configure(dead_at_ticket=[token])
    docs = world.due_messages(["gone"], in_seconds(3))
    mid = docs[0]["_id"]
    world.start_consumer()
    wait_for(lambda: world.all_terminal([mid]), 20, what="terminal")

    doc = world.message(mid)
    assert doc["status"] == "failed"
    assert doc["error"] == "DeviceNotRegistered"
    assert "not a registered push notification recipient" in doc["reason"]
    assert world.fake.stats()["ticket_errors"] == {"DeviceNotRegistered": 1}
    assert world.pushes_to(token) == []


def test_failed_message_too_big_is_refused_before_sending(world):
    world.user("big")
    docs = world.due_messages(["big"], in_seconds(3), arm=False)
    huge = {"blob": "x" * 5000}  # over Expo's 4096-byte payload limit
    world.db[dbm.MESSAGES].update_one({"_id": docs[0]["_id"]}, {"$set": {"data": huge}})
    docs[0]["data"] = huge
    world.planner().arm(docs)
    world.start_consumer()
    mid = docs[0]["_id"]
    wait_for(lambda: world.all_terminal([mid]), 20, what="terminal")

    doc = world.message(mid)
    assert doc["status"] == "failed"
    assert doc["error"] == "MessageTooBig"
    assert "4096" in doc["reason"]
    assert doc["attempts"] == 0  # refused by the sender: nothing went over the wire
    assert world.fake.stats()["requests"] == 0


def test_failed_permanent_4xx_does_not_count_against_the_token(world):
    world.user("auth")
    world.fake.configure(access_token="a-token-the-sender-does-not-have")
    docs = world.due_messages(["auth"], in_seconds(3))
    mid = docs[0]["_id"]
    world.start_consumer()
    wait_for(lambda: world.all_terminal([mid]), 20, what="terminal")

    doc = world.message(mid)
    assert doc["status"] == "failed"
    assert "401" in doc["reason"] or "UNAUTHORIZED" in str(doc["error"])
    assert doc["attempts"] == 1  # a 4xx is not retried
    tok = token_of(world, "auth")  # still active: a request-level error says nothing of it
    assert tok.get("failureCount", 0) == 0


def test_is_missed_when_consumed_after_grace(world):
    set_graces(world, meal=1)
    world.user("late")
    docs = world.due_messages(["late"], in_seconds(-5))  # already 5 s past due, grace 1 s
    mid = docs[0]["_id"]
    world.start_consumer()
    wait_for(lambda: world.all_terminal([mid]), 20, what="terminal")

    doc = world.message(mid)
    assert doc["status"] == "is_missed"
    assert "grace 1 s" in doc["reason"]
    assert world.fake.pushes() == []
