"""tzpush rebuild: after the broker's scheduler store is purged, everything pending is still sent,
once; re-arming what is already armed never causes a second send."""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter

from shared.broker import StompClient
from shared.clock import utcnow
from tests.integration.harness import wait_for
from tests.integration.ops_helpers import run_cli


def purge_scheduler(settings) -> None:
    """Remove every scheduled job (what a broker that lost its scheduler store looks like)."""
    with StompClient(settings) as c:
        c.send(
            "/queue/ActiveMQ.Scheduler.Management",
            b"",
            headers={"AMQ_SCHEDULER_ACTION": "REMOVEALL"},
            persistent=False,
        )
        c.flush()


def test_rebuild_after_purge_sends_every_pending_message_once(world, capsys):
    uids = [f"p{i}" for i in range(6)]
    m = world.manager()
    for i, u in enumerate(uids):
        world.user(u, ["Asia/Tashkent", "Europe/Berlin", "Pacific/Chatham"][i % 3], manager=m)
    due = (utcnow() + dt.timedelta(seconds=6)).replace(microsecond=0)
    docs = world.due_messages(uids, due)  # armed
    purge_scheduler(world.settings)
    world.start_consumer()
    time.sleep(max(0.0, (due - utcnow()).total_seconds()) + 3)
    ids = [d["_id"] for d in docs]
    assert world.fake.pushes() == [], "the purge did not remove the wake-ups"
    assert set(world.statuses(ids).values()) == {"pending"}
    assert run_cli(world.settings, "rebuild") == 0
    assert "re-armed 6 pending message(s)" in capsys.readouterr().out
    wait_for(lambda: world.all_terminal(ids), 30, what="rebuilt messages sent")
    assert set(world.statuses(ids).values()) == {"success"}
    assert Counter(p["data"]["messageId"] for p in world.fake.pushes()) == dict.fromkeys(ids, 1)
    assert run_cli(world.settings, "rebuild") == 0  # idempotent: nothing pending any more
    assert "re-armed 0 pending message(s)" in capsys.readouterr().out


def test_rebuild_over_live_wakeups_never_sends_twice(world):
    uids = [f"d{i}" for i in range(8)]
    m = world.manager()
    for u in uids:
        world.user(u, "America/New_York", manager=m)
    due = (utcnow() + dt.timedelta(seconds=6)).replace(microsecond=0)
    docs = world.due_messages(uids, due)  # armed once
    assert run_cli(world.settings, "rebuild") == 0  # armed twice
    assert run_cli(world.settings, "rebuild") == 0  # armed three times
    world.start_consumer()
    world.start_consumer()  # two competing consumers get the duplicates
    ids = [d["_id"] for d in docs]
    wait_for(lambda: world.all_terminal(ids), 40, what="all sent")
    time.sleep(3)  # leave time for any duplicate to (wrongly) go out
    assert set(world.statuses(ids).values()) == {"success"}
    sent = Counter(p["data"]["messageId"] for p in world.fake.pushes())
    assert sent == dict.fromkeys(ids, 1)
    due_ms = int(due.timestamp() * 1000)
    assert all(p["received_at_ms"] >= due_ms for p in world.fake.pushes())
