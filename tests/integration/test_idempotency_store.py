"""The Idempotency-Key store (``api.idempotency``) on the real database, with controlled clocks:
claims between API processes whose clocks disagree, a process's own running request, and a
record an earlier version left."""

from __future__ import annotations

import datetime as dt

import pytest

from api.idempotency import Claim, IdempotencyStore
from api.problems import ApiProblem
from shared.clock import utcnow
from shared.store import db as dbm
from shared.store.mongo.web import MongoIdempotency


def _store(db, offset: dt.timedelta = dt.timedelta(0)) -> IdempotencyStore:
    return IdempotencyStore(MongoIdempotency(db), lambda: utcnow() + offset)


def _in_use(store: IdempotencyStore, record: str) -> bool:
    try:
        store.begin(record, "h", "other-id")
    except ApiProblem as exc:
        return exc.status == 409
    return False


def test_a_process_whose_clock_runs_ahead_does_not_take_over_a_request_still_running(db):
    a = _store(db)
    b = _store(db, dt.timedelta(seconds=90))
    claim = a.begin("rec", "h", "id-a")
    assert isinstance(claim, Claim)
    assert _in_use(b, "rec")  # 90 s ahead, it would have found A's claim stale
    # And a claim made by a host ahead is not held for longer than the others' minute.
    c = _store(db, dt.timedelta(minutes=10))
    assert isinstance(c.begin("rec2", "h", "id-c"), Claim)
    c._running.clear()  # c died: its claim is left running
    shift = [dt.timedelta(0)]
    d = IdempotencyStore(MongoIdempotency(db), lambda: utcnow() + shift[0])
    assert _in_use(d, "rec2")  # not stale for a host on time, although C's clock is ahead
    shift[0] = dt.timedelta(seconds=61)  # a minute later (the server's clock read before)
    assert d.begin("rec2", "h", "fresh").resource_id == "id-c"  # type: ignore[union-attr]


def test_a_process_never_takes_over_its_own_request_still_running(db):
    clock = [utcnow()]
    store = IdempotencyStore(MongoIdempotency(db), lambda: clock[0])
    first = store.begin("rec", "h", "id-1")
    assert isinstance(first, Claim)
    clock[0] += dt.timedelta(seconds=120)  # the first attempt is slow, not dead
    assert _in_use(store, "rec")
    store.finish("rec", 201, {"id": "id-1"})
    assert store.begin("rec", "h", "other").status == 201  # type: ignore[union-attr]


def test_a_record_an_earlier_version_left_failed_is_taken_over_at_once(db):
    now = utcnow()
    db[dbm.IDEMPOTENCY].insert_one(
        {"_id": "rec", "hash": "h", "state": "failed", "resourceId": "id-old", "createdAt": now}
    )
    claim = _store(db).begin("rec", "h", "fresh")
    assert isinstance(claim, Claim) and claim.resource_id == "id-old"


@pytest.fixture
def db(world):
    return world.db
