"""Issue 5: every reason a planned push is cancelled at send time, each by its own test.

Most changes are made *after the consumer has taken the message* (its send guard exists, it is
holding it until the due instant), so what is proved is the recheck just before sending, not
only the one at preparation. Messages come from ``world.due_messages``: their reminder is
created directly in the database at 03:33 and no planning window is recorded, so management
commands cancel nothing themselves here; the consumer's recheck must.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from shared.clock import utcnow
from shared.store import db as dbm
from tests.integration.consumer_support import guarded, in_seconds
from tests.integration.harness import World, wait_for


def _held(world: World, uid: str, *, seconds: float = 4.0, label: str = "lunch") -> str:
    """One message for ``uid`` due in ``seconds``; return its id once a consumer holds it."""
    docs = world.due_messages([uid], in_seconds(seconds), label=label)
    mid = docs[0]["_id"]
    if not world.consumers:
        world.start_consumer()
    wait_for(lambda: guarded(world, [mid]), 15, what="the consumer to take the message")
    assert world.message(mid)["status"] == "pending"
    return mid


def _cancelled(world: World, mid: str, token: str) -> str:
    wait_for(lambda: world.all_terminal([mid]), 20, what="terminal")
    doc = world.message(mid)
    assert doc["status"] == "cancelled", doc
    assert world.pushes_to(token) == []
    return doc["reason"]


def test_cancelled_user_opted_out_globally(world):
    m = world.manager()
    world.user("off", manager=m)
    mid = _held(world, "off")
    m.upsert_user("off", enabled=False)
    assert _cancelled(world, mid, "ExponentPushToken[off]") == "user turned notifications off"


def test_cancelled_user_opted_out_of_category(world):
    m = world.manager()
    world.user("nomeal", manager=m)
    mid = _held(world, "nomeal")
    m.upsert_user("nomeal", categories={"meal": False})
    reason = _cancelled(world, mid, "ExponentPushToken[nomeal]")
    assert reason == "user turned off meal notifications"


def test_cancelled_reminder_removed_after_planning(world):
    m = world.manager()
    world.user("rm", manager=m)
    mid = _held(world, "rm")
    m.remove_reminder(world.message(mid)["reminderId"])
    assert _cancelled(world, mid, "ExponentPushToken[rm]") == "reminder removed"


def test_cancelled_reminder_moved(world):
    m = world.manager()
    world.user("mv", manager=m)
    mid = _held(world, "mv")
    rem = world.message(mid)["reminderId"]
    m.update_reminder(rem, at="04:44")
    assert world.db[dbm.REMINDERS].find_one({"_id": rem})["version"] == 2
    reason = _cancelled(world, mid, "ExponentPushToken[mv]")
    assert reason == "reminder changed since planning (moved or edited)"


def test_cancelled_token_replaced_by_new_login_on_device(world):
    m = world.manager()
    world.user("relog", device="phone-1", manager=m)
    mid = _held(world, "relog")
    m.register_token("relog", device="phone-1", token="ExponentPushToken[relog-new]")
    reason = _cancelled(world, mid, "ExponentPushToken[relog]")
    assert reason == "token no longer active (token replaced by a new login on the install)"
    assert world.pushes_to("ExponentPushToken[relog-new]") == []  # nothing planned for it yet


def test_cancelled_daily_cap_reached(world):
    m = world.manager()
    world.user("capped", manager=m, daily_cap=1)
    due = in_seconds(4)
    first = world.due_messages(["capped"], due, label="lunch")[0]["_id"]
    second = world.due_messages(["capped"], due + dt.timedelta(seconds=1), label="dinner")[0]["_id"]
    world.start_consumer()
    wait_for(lambda: world.all_terminal([first, second]), 20, what="terminal")

    st = world.statuses([first, second])
    assert st == {first: "success", second: "cancelled"}, st
    assert world.message(second)["reason"] == f"daily cap of 1 reached for {due.date()}"
    assert len(world.pushes_to("ExponentPushToken[capped]")) == 1


def test_cancelled_quiet_hours(world):
    tz = "Asia/Tokyo"
    due = in_seconds(4)
    local = due.astimezone(ZoneInfo(tz))
    quiet = (
        (local - dt.timedelta(minutes=30)).strftime("%H:%M"),
        (local + dt.timedelta(minutes=30)).strftime("%H:%M"),
    )
    world.user("sleepy", tz, quiet_hours=quiet)
    mid = world.due_messages(["sleepy"], due)[0]["_id"]
    world.start_consumer()
    reason = _cancelled(world, mid, "ExponentPushToken[sleepy]")
    assert reason == f"quiet hours {quiet[0]}-{quiet[1]} ({tz})"


def test_recheck_leaves_unchanged_users_alone(world):
    """Control for the tests above: the same flow without a change sends the push."""
    m = world.manager()
    world.user("same", manager=m)
    mid = _held(world, "same")
    m.upsert_user("same", enabled=True)  # a change of intent that changes nothing
    wait_for(lambda: world.all_terminal([mid]), 20, what="terminal")
    assert world.message(mid)["status"] == "success"
    assert utcnow() >= world.message(mid)["scheduledAt"]
