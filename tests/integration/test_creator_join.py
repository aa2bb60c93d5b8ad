"""A creator joining the fleet waits one heartbeat only when another creator is alive (so that
one sees it and gives it its share), and says so; alone, ``tzpush creator --once`` starts
planning at once instead of sitting silent for a third of the lease."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time

from creator.planner import Planner
from creator.service import join_fleet
from shared.store import db as dbm
from tests.integration.conftest import make_test_settings

LEASE_S = 9.0  # a heartbeat of 3 s: long enough to tell waiting from not


def _planner(db) -> Planner:
    settings = make_test_settings(creator={"lease_seconds": LEASE_S})
    return Planner(db, None, settings)


def test_a_creator_alone_joins_at_once(db):
    planner = _planner(db)
    t0 = time.monotonic()
    join_fleet(planner)
    assert time.monotonic() - t0 < 1.0
    assert db[dbm.CREATORS].find_one({"_id": planner.membership.me}) is not None


def test_a_creator_joining_another_waits_one_heartbeat_and_says_why(db, caplog):
    now = dt.datetime.now(dt.UTC)
    db[dbm.CREATORS].insert_one({"_id": "other-host:1:abc", "heartbeatAt": now, "startedAt": now})
    planner = _planner(db)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()  # the wait ends at stop, as on SIGTERM
    t0 = time.monotonic()
    with caplog.at_level(logging.INFO, logger="creator.service"):
        join_fleet(planner, stop)
    assert 0.4 < time.monotonic() - t0 < 2.0
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "1 other creator" in said and "3 s" in said, said
