"""Issue 5: pushes reach Expo at or after their due instant, never before, and soon after it."""

from __future__ import annotations

import datetime as dt

from shared.store import db as dbm
from tests.integration.consumer_support import in_seconds, ms
from tests.integration.harness import wait_for

ZONES = ["Asia/Tashkent", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"]
LATE_BOUND_MS = 10_000  # generous: tight figures are for the benchmarks


def test_pushes_arrive_at_or_after_due_never_before(world):
    m = world.manager()
    users = [f"u{i}" for i in range(10)]
    for i, uid in enumerate(users):
        world.user(uid, ZONES[i % len(ZONES)], manager=m)
    # Two arbitrary (non-whole-second) instants 1.5 s apart: one wake-up, two holds.
    due1 = in_seconds(4.3)
    due2 = due1 + dt.timedelta(milliseconds=1500)
    docs = world.due_messages(users[:5], due1, label="a", planner=m.planner)
    docs += world.due_messages(users[5:], due2, label="b", planner=m.planner)
    due_of = {d["_id"]: ms(d["scheduledAt"]) for d in docs}
    ids = list(due_of)

    world.start_consumer()
    wait_for(lambda: world.all_terminal(ids), 30, what="all messages terminal")

    assert set(world.statuses(ids).values()) == {"success"}
    pushes = world.fake.pushes()
    assert sorted(p["data"]["messageId"] for p in pushes) == sorted(ids)  # each exactly once
    for p in pushes:
        due_ms = due_of[p["data"]["messageId"]]
        assert p["received_at_ms"] >= due_ms, f"{p['to']} arrived before its due instant"
        assert p["received_at_ms"] - due_ms < LATE_BOUND_MS
    for doc in world.db[dbm.MESSAGES].find({"_id": {"$in": ids}}):
        assert 0 <= doc["lateness_ms"] < LATE_BOUND_MS
        assert doc["sentAt"] >= doc["scheduledAt"]
