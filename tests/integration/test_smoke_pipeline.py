"""Smoke: messages due in a few seconds go out at (not before) their instant, once."""

from __future__ import annotations

import datetime as dt

from shared.clock import utcnow
from tests.integration.harness import wait_for


def test_due_messages_arrive_at_due_instant_once(world):
    for i in range(3):
        world.user(f"u{i}", ["Asia/Tashkent", "Europe/Berlin", "America/New_York"][i])
    due = (utcnow() + dt.timedelta(seconds=4)).replace(microsecond=0)
    docs = world.due_messages([f"u{i}" for i in range(3)], due)
    rc = world.start_consumer()
    ids = [d["_id"] for d in docs]
    wait_for(lambda: world.all_terminal(ids), 30, what="all terminal")
    rc.stop()
    pushes = world.fake.pushes()
    assert len(pushes) == 3
    due_ms = int(due.timestamp() * 1000)
    for p in pushes:
        assert p["received_at_ms"] >= due_ms
        assert p["received_at_ms"] - due_ms < 10_000
    assert set(world.statuses(ids).values()) == {"success"}
