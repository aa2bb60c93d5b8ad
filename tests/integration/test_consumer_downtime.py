"""Issue 5: a consumer down for 60 s sends what is still within grace and marks the rest missed.

Two categories with different grace windows (30 s and 600 s), all due 2 s from now; no consumer
runs for the next 60 s (the wake-ups wait in the broker); then one starts. This test takes
about 70 s: the downtime is the scenario, not a synchronisation sleep.
"""

from __future__ import annotations

import datetime as dt

from shared.clock import utcnow
from shared.store import db as dbm
from tests.integration.consumer_support import (
    arm,
    herd,
    ids_of,
    in_seconds,
    ms,
    set_graces,
    terminal,
)
from tests.integration.harness import wait_for

DOWN_S = 60


def test_consumer_down_60s_sends_within_grace_and_misses_the_rest(world):
    set_graces(world, meal=30, mood=600)
    due = in_seconds(2)
    short = herd(world, 20, due, prefix="short", category="meal")
    long = herd(world, 20, due, prefix="long", category="mood")
    arm(world, short + long)

    back = due + dt.timedelta(seconds=DOWN_S)
    wait_for(lambda: utcnow() >= back, DOWN_S + 15, interval=1.0, what="the downtime")
    assert world.fake.pushes() == []
    assert {world.message(i)["status"] for i in ids_of(short + long)} == {"pending"}

    started_ms = ms(utcnow())
    world.start_consumer()
    wait_for(lambda: terminal(world, 40), 30, what="every message terminal")

    for i in ids_of(short):
        doc = world.message(i)
        assert doc["status"] == "is_missed", doc
        assert "grace 30 s" in doc["reason"]
    for i in ids_of(long):
        doc = world.message(i)
        assert doc["status"] == "success", doc
        assert DOWN_S * 1000 <= doc["lateness_ms"] < 600_000
    pushes = world.fake.pushes()
    assert sorted(p["data"]["messageId"] for p in pushes) == sorted(ids_of(long))
    assert all(p["received_at_ms"] >= started_ms for p in pushes)
    assert world.db[dbm.SENDS].count_documents({}) == 40  # each one taken exactly once
