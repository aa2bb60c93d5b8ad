"""The management paths an app backend drives (a login, onboarding) read through an index.

On SecantusDB a query no index serves reads the whole collection (about 20 ms per 1,000 tokens
measured); a login that scans the tokens gets slower with every user. So every read these paths
issue is captured (pymongo command monitoring) and checked against the indexes by the rule the
server follows (``_unserved``). Measured on SecantusDB 0.7: ``{isActive: true, userId: {$in}}``
scans (21 ms at 1,100 tokens) where ``{userId: {$in}, isActive: true}`` is served (0.9 ms), and a
partial index whose filter has a ``$type`` clause is never used (78 ms at 5,000 tokens): token
strings have a plain index of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pymongo import monitoring
from pymongo.database import Database

from shared.store import db as dbm

Doc = dict[str, Any]


class _Reads(monitoring.CommandListener):
    """The ``find`` commands sent while recording (collection and filter)."""

    def __init__(self) -> None:
        self.recording = False
        self.finds: list[tuple[str, Doc]] = []
        self.lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.recording and event.command_name == "find":
            with self.lock:
                self.finds.append((str(event.command["find"]), dict(event.command["filter"])))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


_READS = _Reads()
monitoring.register(_READS)


@pytest.fixture
def reads() -> Iterator[Callable[[Callable[[], Any]], list[tuple[str, Doc]]]]:
    def record(action: Callable[[], Any]) -> list[tuple[str, Doc]]:
        _READS.finds.clear()
        _READS.recording = True
        try:
            action()
        finally:
            _READS.recording = False
        return list(_READS.finds)

    yield record
    _READS.recording = False


def _unserved(db: Database[Doc], finds: list[tuple[str, Doc]]) -> list[str]:
    """The finds no index serves, by the rule this server follows (measured; its ``explain``
    claims a COLLSCAN for queries it serves from an index, so it cannot be the oracle): it picks
    the index whose first key is the filter's first field, and a partial index only when the
    filter names each field of the partial filter with the same value."""
    out = []
    for coll, flt in finds:
        if not flt or next(iter(flt)) == "_id":
            continue
        first = next(iter(flt))
        served = False
        for ix in db[coll].list_indexes():
            if next(iter(ix["key"])) != first:
                continue
            partial = ix.get("partialFilterExpression") or {}
            if all(flt.get(k) == v for k, v in partial.items()):
                served = True
        if not served:
            out.append(f"{coll} {flt}")
    return out


def test_a_login_reads_only_through_indexes(world, reads):
    m = world.manager()
    world.planner().run_pass()  # a planned window: a login plans the new device at once
    for i in range(20):
        world.user(f"u{i}", device=f"d{i}", token=f"ExponentPushToken[t{i}]", manager=m)
        m.add_reminder(f"u{i}", category="meal", label="lunch", at="12:30")
    finds = reads(lambda: m.register_token("u3", device="new-phone", token="ExponentPushToken[n]"))
    assert finds, "the login read nothing?"
    scans = _unserved(world.db, finds)
    assert not scans, "\n".join(scans)


def test_active_registrations_without_a_token_string_do_not_collide(db):
    """Documents written without a token (by hand, by another tool) are bad documents the
    planner reports, not a reason for the unique index to refuse the next one (or to fail to
    build on an existing database)."""
    dbm.ensure_indexes(db)
    db[dbm.TOKENS].insert_many(
        [{"_id": f"t{i}", "userId": "u", "deviceId": f"d{i}", "isActive": True} for i in range(3)]
    )
    assert db[dbm.TOKENS].count_documents({"isActive": True}) == 3


def test_the_look_for_stopped_replays_reads_through_an_index(world, reads):
    """The janitor (and every replay's start) looks for ``replaying`` messages whose lease ran
    out. It read the whole messages collection: at 1M messages, with another creator inserting,
    that read passed the driver's 30 s socket timeout and the creator's pass failed
    (bench scale, 2 creators, 2026-12-01)."""
    from shared.clock import utcnow
    from shared.store import replays

    dbm.ensure_indexes(world.db)
    finds = reads(lambda: replays.stale_holders(world.db, utcnow()))
    assert finds
    scans = _unserved(world.db, finds)
    assert not scans, "\n".join(scans)


def test_the_replaying_index_hides_no_other_status(db):
    """The server here picks its index by the filter's first field: a query on ``status`` must
    still see every status, not only the ``replaying`` ones the partial index holds."""
    dbm.ensure_indexes(db)
    import datetime as dt

    at = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    base = {"isDeleted": False, "scheduledAt": at, "userId": "u", "category": "meal"}
    db[dbm.MESSAGES].insert_many(
        [
            {**base, "_id": "p1", "status": "pending", "label": "a"},
            {**base, "_id": "p2", "status": "pending", "label": "b"},
            {**base, "_id": "r1", "status": "replaying", "label": "c"},
            {**base, "_id": "m1", "status": "is_missed", "label": "d"},
        ]
    )
    msgs = db[dbm.MESSAGES]
    assert msgs.count_documents({"status": "pending"}) == 2
    assert msgs.count_documents({"status": "pending", "isDeleted": False, "scheduledAt": at}) == 2
    assert {d["_id"] for d in msgs.find({"status": "is_missed"})} == {"m1"}
    assert {d["_id"] for d in msgs.find({"status": "replaying"})} == {"r1"}
