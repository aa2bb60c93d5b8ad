"""Issue 14: a device (an Expo token: an app install, not a person) passed to another user.

User A plans a reminder on an install; user B then registers the same token string, on the same
device id (a logout and a login on one phone) or under another device id (a reinstall or a
backend that keys devices differently). From then on the install must get B's pushes only: A's
pending messages for that install end ``cancelled`` ("token replaced"), whether a consumer had
already taken them (held until the due instant) or not, and only one registration of the token
string is active.
"""

from __future__ import annotations

import datetime as dt

import pytest

from shared.clock import utcnow
from shared.store import db as dbm
from tests.integration.consumer_support import guarded, in_seconds
from tests.integration.harness import wait_for

INSTALL = "ExponentPushToken[one-install]"


@pytest.mark.parametrize("same_device", [True, False], ids=["same-device", "other-device-id"])
@pytest.mark.parametrize("held", [False, True], ids=["before-taken", "while-held"])
def test_a_device_passed_to_another_user_gets_that_users_pushes_only(world, same_device, held):
    m = world.manager()
    world.user("alice", device="phone-1", token=INSTALL, manager=m)
    # Alice logged in long ago: her last intent change is older than any planning snapshot, so
    # consumers trust the snapshot of her messages unless something stamps her again.
    long_ago = utcnow() - dt.timedelta(days=1)
    world.db[dbm.CHANGES].update_one({"_id": "alice"}, {"$set": {"at": long_ago}})
    a_id = world.due_messages(["alice"], in_seconds(6), label="pill")[0]["_id"]
    world.start_consumer()
    if held:
        wait_for(lambda: guarded(world, [a_id]), 15, what="the consumer to hold A's message")
    world.user("bob", device="phone-1" if same_device else "phone-2", token=INSTALL, manager=m)
    b_id = world.due_messages(["bob"], in_seconds(6), label="lunch")[0]["_id"]

    wait_for(lambda: world.all_terminal([a_id, b_id]), 30, what="both messages to end")
    sent = [p["data"]["messageId"] for p in world.pushes_to(INSTALL)]
    assert sent == [b_id], f"the install got {sent}; only Bob's {b_id} may reach it"
    a = world.message(a_id)
    assert a["status"] == "cancelled" and "token replaced" in a["reason"], a
    assert world.message(b_id)["status"] == "success"
    active = list(world.db[dbm.TOKENS].find({"token": INSTALL, "isActive": True}))
    assert [t["userId"] for t in active] == ["bob"]


def test_the_same_user_on_a_new_device_id_keeps_one_registration(world):
    """A backend that re-keys a device: the token string stays registered once, to its user."""
    m = world.manager()
    world.user("carol", device="old-id", token=INSTALL, manager=m)
    m.register_token("carol", device="new-id", token=INSTALL)
    active = list(world.db[dbm.TOKENS].find({"token": INSTALL, "isActive": True}))
    assert [(t["userId"], t["deviceId"]) for t in active] == [("carol", "new-id")]
