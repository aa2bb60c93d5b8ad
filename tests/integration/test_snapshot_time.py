"""Issue 14, edits during a long planning pass: a wake-up's snapshot time is when its data was
read, not when it was armed, so an edit made in between is rechecked at send time. A re-arm
(``tzpush rebuild``) keeps the snapshot time of the documents it re-arms.

The creator's clock is put in the past so that the pass "read" minutes ago while the consumer
runs on the real clock now: the edit is then older than the consumer's own look-back at the due
instant, and only the snapshot time carried by the wake-up can catch it.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import Counter
from typing import Any

from shared.clock import utcnow
from shared.store import db as dbm
from tests.integration.harness import World, wait_for
from tests.integration.ops_helpers import run_cli


def _pushes_by_message(world: World) -> Counter[str]:
    return Counter(p["data"]["messageId"] for p in world.fake.pushes())


def test_a_reminder_removed_during_a_long_pass_is_never_sent(world: World) -> None:
    real_now = utcnow()
    read_at = real_now - dt.timedelta(seconds=200)  # the pass reads reminders, users, tokens
    removed_at = read_at + dt.timedelta(seconds=5)  # an operator removes one reminder
    armed_at = read_at + dt.timedelta(seconds=70)  # the pass inserts and arms, 70 s later
    # A whole minute between the read and the arming: due before the arming (so the wake-up
    # fires at once) and well within the meal grace (900 s) now.
    due = (read_at + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    assert read_at < due <= armed_at

    m = world.manager()
    m.planner.clock = lambda: read_at - dt.timedelta(seconds=60)  # set up before the pass
    rids = {}
    for uid in ("gone", "kept"):
        world.user(uid, "UTC", manager=m)
        rids[uid] = m.add_reminder(uid, category="meal", label="lunch", at=f"{due:%H:%M}")["_id"]

    calls = itertools.count()
    planner = world.planner(clock=lambda: read_at if next(calls) == 0 else armed_at)
    insert = planner.inserter.insert

    def insert_after_removal(
        docs: list[dict[str, Any]], report: Any, *rest: Any
    ) -> list[dict[str, Any]]:
        if rids["gone"] in {d["reminderId"] for d in docs}:
            m.planner.clock = lambda: removed_at
            m.remove_reminder(rids["gone"])  # read before, inserted after: the race
        return insert(docs, report, *rest)

    planner.inserter.insert = insert_after_removal  # type: ignore[method-assign]
    report = planner.run_pass()
    assert report.inserted == 2 and report.wakeups >= 1

    msgs = {d["userId"]: d["_id"] for d in world.db[dbm.MESSAGES].find()}
    # Inserted after the removal, and ended by the pass itself once it saw the change in the
    # log after its insert (``Repairs.replan_changed``); before, the consumer cancelled it.
    assert world.statuses()[msgs["gone"]] == "cancelled"
    rc = world.start_consumer(burst=True)
    wait_for(lambda: world.all_terminal(list(msgs.values())), 30, what="both terminal")
    rc.join(60)
    gone = world.message(msgs["gone"])
    assert world.pushes_to("ExponentPushToken[gone]") == [], gone
    assert (gone["status"], gone["reason"]) == ("cancelled", "reminder removed")
    assert world.message(msgs["kept"])["status"] == "success"
    assert _pushes_by_message(world) == {msgs["kept"]: 1}


def test_a_rebuild_keeps_the_snapshot_time_of_what_it_re_arms(world: World) -> None:
    now = utcnow()
    planned_at = now - dt.timedelta(seconds=300)  # planned 5 minutes ago
    changed_at = now - dt.timedelta(seconds=200)  # then the user turned notifications off
    m = world.manager()
    m.planner.clock = lambda: planned_at - dt.timedelta(seconds=60)
    for uid in ("quiet", "loud"):
        world.user(uid, "UTC", manager=m)
    due = (now - dt.timedelta(seconds=30)).replace(microsecond=0)  # overdue, within grace
    docs = world.due_messages(["quiet", "loud"], due, arm=False)  # the broker lost them
    world.db[dbm.MESSAGES].update_many({}, {"$set": {"plannedAt": planned_at}})
    m.planner.clock = lambda: changed_at
    # A preference change cancels nothing in the database: it is rechecked at send time.
    m.upsert_user("quiet", enabled=False)
    ids = {d["userId"]: d["_id"] for d in docs}
    assert set(world.statuses().values()) == {"pending"}

    assert run_cli(world.settings, "rebuild") == 0
    rc = world.start_consumer(burst=True)
    wait_for(lambda: world.all_terminal(list(ids.values())), 30, what="both terminal")
    rc.join(60)
    quiet = world.message(ids["quiet"])
    assert world.pushes_to("ExponentPushToken[quiet]") == [], quiet
    assert (quiet["status"], quiet["reason"]) == ("cancelled", "user turned notifications off")
    assert _pushes_by_message(world) == {ids["loud"]: 1}
