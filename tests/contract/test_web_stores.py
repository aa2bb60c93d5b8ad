"""The storage seam's contract for the HTTP API's own records (``shared.store.abc_web``): the
same answers from the memory twin and from the MongoDB adapter (the same functions, run by
tests/integration/test_contract_mongo_web.py with its own ``web`` fixture)."""

from __future__ import annotations

import datetime as dt

import pytest

from api.idempotency import Claim, IdempotencyStore, Stored
from api.problems import ApiProblem
from shared.clock import utcnow
from tests.contract.backends import WebBackend, memory_web_backend

T0 = dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)  # whole milliseconds: MongoDB keeps no more


@pytest.fixture
def web() -> WebBackend:
    return memory_web_backend()


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def record(rid: str = "r1", **fields: object) -> dict:
    """An Idempotency-Key record as ``api.idempotency`` claims it."""
    return {
        "_id": rid,
        "hash": "h",
        "userId": "u",
        "state": "running",
        "resourceId": "res-1",
        "createdAt": at(0),
        "claimedAt": at(0),
        "owner": "p1",
        "attempt": "a1",
        **fields,
    }


# -- Idempotency-Key records --------------------------------------------------------------------
def test_a_claim_is_refused_while_a_record_holds_its_id(web: WebBackend):
    records = web.stores.idempotency
    assert records.claim(record())
    assert not records.claim(record(owner="p2", attempt="a2"))
    assert records.get("r1") == record()
    assert records.get("other") is None


def test_a_record_given_out_is_a_copy(web: WebBackend):
    records = web.stores.idempotency
    records.claim(record())
    got = records.get("r1")
    assert got is not None
    got["state"] = "done"
    assert records.get("r1") == record()


def test_an_expired_record_is_dropped_only_if_it_was_not_claimed_again(web: WebBackend):
    records = web.stores.idempotency
    records.claim(record())
    records.drop_expired("r1", at(-1))  # claimed again meanwhile: another createdAt
    assert records.get("r1") is not None
    records.drop_expired("r1", at(0))
    assert records.get("r1") is None
    records.drop_expired("r1", at(0))  # gone already: nothing to do


def test_a_take_over_is_a_compare_and_set_on_state_and_claim_time(web: WebBackend):
    records = web.stores.idempotency
    records.claim(record())
    mine = {"state": "running", "claimedAt": at(70), "owner": "p2", "attempt": "a2"}
    assert not records.take_over("r1", "done", at(0), mine)  # its state changed
    assert not records.take_over("r1", "running", at(1), mine)  # claimed again meanwhile
    assert not records.take_over("absent", "running", at(0), mine)
    assert records.take_over("r1", "running", at(0), mine)
    assert records.get("r1") == record(claimedAt=at(70), owner="p2", attempt="a2")
    theirs = {"state": "running", "claimedAt": at(71), "owner": "p3", "attempt": "a3"}
    assert not records.take_over("r1", "running", at(0), theirs)  # the loser of the race


def test_a_record_without_a_claim_time_is_taken_over_by_naming_none(web: WebBackend):
    """A record an earlier version left: ``failed``, no ``claimedAt``."""
    web.seed("idempotency", {"_id": "old", "hash": "h", "state": "failed", "createdAt": at(0)})
    records = web.stores.idempotency
    fields = {"state": "running", "claimedAt": at(5), "owner": "p1", "attempt": "a1"}
    assert records.take_over("old", "failed", None, fields)
    doc = web.raw("idempotency", "old")
    assert doc is not None and (doc["state"], doc["claimedAt"]) == ("running", at(5))


def test_completing_sets_the_answer_whatever_the_record_holds(web: WebBackend):
    records = web.stores.idempotency
    records.claim(record())
    records.complete("r1", {"state": "done", "status": 201, "body": '{"id": "res-1"}'})
    doc = records.get("r1")
    assert doc is not None
    assert (doc["state"], doc["status"], doc["body"]) == ("done", 201, '{"id": "res-1"}')
    records.complete("absent", {"state": "done"})  # no record made
    assert records.get("absent") is None


def test_release_deletes_only_a_running_record_of_the_same_attempt(web: WebBackend):
    records = web.stores.idempotency
    records.claim(record())
    records.release("r1", "a2")  # another attempt's
    assert records.get("r1") is not None
    records.complete("r1", {"state": "done"})
    records.release("r1", "a1")  # done: the answer stays
    assert records.get("r1") is not None
    records.claim(record("r2"))
    records.release("r2", "a1")
    assert records.get("r2") is None


def test_a_cut_dates_back_only_a_running_record_of_the_same_attempt(web: WebBackend):
    records = web.stores.idempotency
    long_ago = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    records.claim(record())
    records.cut("r1", "a2", long_ago)
    assert records.get("r1") == record()
    records.cut("r1", "a1", long_ago)
    assert records.get("r1") == record(claimedAt=long_ago)
    records.complete("r1", {"state": "done"})
    records.cut("r1", "a1", at(9))
    doc = records.get("r1")
    assert doc is not None and doc["claimedAt"] == long_ago


def test_the_records_clock_is_the_time_every_process_agrees_on(web: WebBackend):
    clock = web.stores.idempotency.clock(utcnow, dt.timedelta(minutes=5))
    assert abs((clock() - utcnow()).total_seconds()) < 5


def test_expiry_can_be_made_again(web: WebBackend):
    web.stores.ensure_expiry()
    web.stores.ensure_expiry()


def test_a_retry_gets_the_first_answer_and_a_second_request_waits(web: WebBackend):
    """``api.idempotency``'s rule over either store."""
    store = IdempotencyStore(web.stores.idempotency)
    claim = store.begin("rec", "h", "id-1")
    assert claim == Claim("id-1")
    with pytest.raises(ApiProblem, match="still in progress"):
        IdempotencyStore(web.stores.idempotency).begin("rec", "h", "id-2")
    store.finish("rec", 201, {"id": "id-1"})
    assert store.begin("rec", "h", "id-3") == Stored(201, {"id": "id-1"})
    with pytest.raises(ApiProblem, match="another request"):
        store.begin("rec", "other body", "id-4")


# -- console sessions ---------------------------------------------------------------------------
def session(sid: str = "s1") -> dict:
    return {
        "_id": sid,
        "keyName": "oncall",
        "keyId": "k",
        "csrf": "c",
        "createdAt": at(0),
        "expiresAt": at(3600),
    }


def test_a_session_is_kept_until_it_is_deleted(web: WebBackend):
    sessions = web.stores.sessions
    assert sessions.get("s1") is None
    sessions.add(session())
    sessions.add(session("s2"))
    assert sessions.get("s1") == session()
    sessions.delete("s1")
    sessions.delete("s1")  # logged out twice: fine
    assert sessions.get("s1") is None
    assert web.raw("sessions", "s2") == session("s2")


def test_a_session_given_out_is_a_copy(web: WebBackend):
    sessions = web.stores.sessions
    sessions.add(session())
    got = sessions.get("s1")
    assert got is not None
    got["csrf"] = "forged"
    assert sessions.get("s1") == session()
