"""Issue 14, "Never twice": merging the same send journal twice changes nothing the second time.

A journal document can be merged again: a merge retried after a transient error part-way, a
recorder that merged its jobs but died before deleting the document, two mergers at once (a
takeover merging a live owner's journal while its own recorder does, the janitor beside a
starting consumer). Message updates were always idempotent; the cap refunds (``$inc`` of a
counter) and the failure count of a token were not. Each journal below holds, for one capped
user and one token: a success pushed at t0, then two failures (``MessageRateExceeded``, capped)
pushed at t0 + 1 s. Merged once: two reservations back (counter 3 -> 1), failureCount 2, the
token still active. Since issue 15 ``MessageRateExceeded`` no longer counts against a device (the
table, ``TOKEN_EFFECTS``, marks no Expo code so); the ``counted`` fixture marks it for these
tests, whose subject is merging twice, not the table.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pymongo.collection
import pytest
from pymongo.errors import AutoReconnect

import consumer.recorder as recorder_mod
import shared.store.journal as journal
import shared.store.tokens as tokens_mod
from consumer.recorder import Job, Recorder
from shared.domain.outcomes import (
    TOKEN_EFFECTS,
    EffectKind,
    ErrorCode,
    journal_row,
    pack_journal,
)
from shared.errors import TransientError
from shared.store import db as dbm
from shared.store.journal import merge_journal
from tests.integration.harness import wait_for

RATE = "MessageRateExceeded"
T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
DUE_MS = int(T0.timestamp() * 1000) - 20
USER, TOKEN, DAY = "cap-user", "cap-token", "2026-11-30"
COUNTER = f"{USER}:{DAY}"
OK_ID, FAIL_IDS = "m-ok", ["m-f1", "m-f2"]
MERGED_ONCE = {"count": 1, "failureCount": 2, "isActive": True}


@pytest.fixture(autouse=True)
def counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """These journals' failures count against the token (see the module's docstring)."""
    monkeypatch.setitem(TOKEN_EFFECTS, ErrorCode.MESSAGE_RATE_EXCEEDED, EffectKind.FAIL)


def _row(mid: str, ok: bool) -> list[Any]:
    return journal_row(
        id=mid,
        ok=ok,
        ticket=f"tk-{mid}" if ok else None,
        error=None if ok else RATE,
        message=None if ok else "rate exceeded",
        attempts=1,
        token=TOKEN,
        user=USER,
        cap=True,
        ld=DAY,
        due=DUE_MS,
        code=None if ok else RATE,
    )


REQUESTS = [
    (T0, [_row(OK_ID, True)]),
    (T0 + dt.timedelta(seconds=1), [_row(m, False) for m in FAIL_IDS]),
]


def _journal_doc(consumer: str = "c-dead") -> dict[str, Any]:
    return {"_id": "j-1", "consumer": consumer, "at": T0, "packed": pack_journal(REQUESTS)}


def _seed(db: Any, consumer: str | None = "c-dead") -> None:
    dbm.ensure_indexes(db)  # the failing_tokens hint of a success's reset
    db[dbm.TOKENS].insert_one(
        {
            "_id": TOKEN,
            "userId": USER,
            "deviceId": "dev-cap",
            "token": "ExponentPushToken[cap]",
            "isActive": True,
            "failureCount": 0,
        }
    )
    db[dbm.COUNTERS].insert_one({"_id": COUNTER, "count": 3})  # three sends reserved today
    db[dbm.MESSAGES].insert_many(
        [
            {
                "_id": m,
                "userId": USER,
                "notificationTokenId": TOKEN,
                "category": "meal",
                "label": m,
                "reminderId": f"rem-{m}",  # three reminders: the pending index names it
                "status": "pending",
                "isDeleted": False,
                "scheduledAt": T0,
            }
            for m in [OK_ID, *FAIL_IDS]
        ]
    )
    if consumer is not None:
        db[dbm.JOURNAL].insert_one(_journal_doc(consumer))


def _state(db: Any) -> dict[str, Any]:
    counter = db[dbm.COUNTERS].find_one({"_id": COUNTER}) or {}
    token = db[dbm.TOKENS].find_one({"_id": TOKEN}) or {}
    return {
        "count": counter.get("count"),
        "failureCount": token.get("failureCount"),
        "isActive": token.get("isActive"),
    }


def _statuses(db: Any) -> dict[str, str]:
    return {d["_id"]: d["status"] for d in db[dbm.MESSAGES].find({}, {"status": 1})}


def _merge(db: Any, consumer: str = "c-dead", max_failures: int = 3) -> int:
    return merge_journal(
        db,
        receipts_delay_s=900.0,
        max_failures=max_failures,
        consumer=consumer,
        clock=lambda: T0 + dt.timedelta(minutes=1),
    )


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], list[str]]]:
    """``gate(n)``: the first ``apply_outcomes`` of each of ``n`` threads waits until all ``n``
    have read what they apply, so their writes overlap; returns the threads that met."""
    real = journal.apply_outcomes
    met: list[str] = []
    state: dict[str, Any] = {}

    def gated(*args: Any, **kw: Any) -> None:
        me = threading.current_thread().name
        if me not in state["seen"]:
            state["seen"].add(me)
            try:
                state["barrier"].wait(timeout=15)
                met.append(me)
            except threading.BrokenBarrierError:
                pass
        real(*args, **kw)

    def arm(n: int) -> list[str]:
        state.update(barrier=threading.Barrier(n), seen=set())
        monkeypatch.setattr(journal, "apply_outcomes", gated)
        monkeypatch.setattr(recorder_mod, "apply_outcomes", gated)
        return met

    yield arm


# -- (a) the same document merged twice ---------------------------------------------------------
def test_the_same_journal_document_merged_twice_refunds_and_counts_once(db: Any) -> None:
    _seed(db)
    assert _merge(db) == 3
    once = _state(db)
    assert once == MERGED_ONCE
    db[dbm.JOURNAL].insert_one(_journal_doc())  # e.g. a recorder merged it, then died undeleted
    _merge(db)
    assert _state(db) == once
    assert _statuses(db) == {OK_ID: "success", "m-f1": "failed", "m-f2": "failed"}


def test_a_merge_that_failed_before_its_delete_is_retried_without_counting_again(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(db)
    real_delete = pymongo.collection.Collection.delete_many
    calls = {"n": 0}

    def flaky_delete(self: Any, *args: Any, **kw: Any) -> Any:
        if self.name == dbm.JOURNAL and calls["n"] == 0:
            calls["n"] += 1
            raise AutoReconnect("connection lost (simulated)")
        return real_delete(self, *args, **kw)

    monkeypatch.setattr(pymongo.collection.Collection, "delete_many", flaky_delete)
    with pytest.raises(TransientError):
        _merge(db)  # everything applied, the journal document still there
    assert db[dbm.JOURNAL].count_documents({}) == 1
    _merge(db)
    assert db[dbm.JOURNAL].count_documents({}) == 0
    assert _state(db) == MERGED_ONCE


def test_a_merge_that_failed_between_refunds_and_token_hygiene_is_retried_safely(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(db)
    real = journal.token_hygiene

    def lost(*args: Any, **kw: Any) -> None:
        raise AutoReconnect("connection lost (simulated)")

    monkeypatch.setattr(journal, "token_hygiene", lost)
    with pytest.raises(TransientError):
        _merge(db)  # messages and refunds in, token effects not
    monkeypatch.setattr(journal, "token_hygiene", real)
    _merge(db)
    assert _state(db) == MERGED_ONCE


def test_a_retry_after_the_deactivation_failed_deactivates_without_counting_again(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(db)
    real = tokens_mod.deactivate_tokens
    calls = {"n": 0}

    def flaky(*args: Any, **kw: Any) -> Any:
        if calls["n"] == 0:
            calls["n"] += 1
            raise AutoReconnect("connection lost (simulated)")
        return real(*args, **kw)

    monkeypatch.setattr(tokens_mod, "deactivate_tokens", flaky)
    with pytest.raises(TransientError):
        _merge(db, max_failures=2)  # both failures counted, the deactivation lost
    _merge(db, max_failures=2)
    token = db[dbm.TOKENS].find_one({"_id": TOKEN})
    assert (token["failureCount"], token["isActive"]) == (2, False)
    assert token["deactivationReason"] == f"2 consecutive failures (last: {RATE})"
    assert (db[dbm.COUNTERS].find_one({"_id": COUNTER}) or {})["count"] == 1


def test_merging_again_does_not_undo_what_the_receipt_poller_wrote(db: Any) -> None:
    _seed(db)
    _merge(db)
    receipt = {"state": "error", "error": "DeviceNotRegistered"}
    db[dbm.MESSAGES].update_one({"_id": OK_ID}, {"$set": {"status": "failed", "receipt": receipt}})
    db[dbm.JOURNAL].insert_one(_journal_doc())
    _merge(db)
    doc = db[dbm.MESSAGES].find_one({"_id": OK_ID})
    assert (doc["status"], doc["receipt"]) == ("failed", receipt)


# -- (b) two mergers of one document at once ----------------------------------------------------
def test_two_merges_of_one_document_at_once_refund_and_count_once(
    db: Any, gate: Callable[[int], list[str]]
) -> None:
    _seed(db)
    met = gate(2)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            _merge(db)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, name=f"merger-{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert sorted(met) == ["merger-0", "merger-1"]  # both applied the document at once
    assert _state(db) == MERGED_ONCE
    assert db[dbm.JOURNAL].count_documents({}) == 0


def test_a_takeover_merging_a_live_recorders_journal_at_once_counts_once(
    db: Any, gate: Callable[[int], list[str]]
) -> None:
    _seed(db, consumer=None)
    herd = threading.Event()
    herd.set()
    rec = Recorder(
        db,
        consumer="c-live",
        busy=herd.is_set,  # a herd in flight: journal now, merge once it is over
        max_defer_s=600.0,
        clock=lambda: T0 + dt.timedelta(minutes=1),
    )
    jobs = [Job(outcomes=[], journal=rows, journal_at=at) for at, rows in REQUESTS]
    for job in jobs:
        rec.put(job)
    wait_for(lambda: all(j.journaled_at for j in jobs), 10, what="both requests journaled")
    met = gate(2)
    errors: list[BaseException] = []

    def takeover() -> None:
        try:
            _merge(db, consumer="c-live")
        except BaseException as exc:  # reported below
            errors.append(exc)

    other = threading.Thread(target=takeover, name="takeover")
    other.start()
    herd.clear()  # the recorder merges its own jobs now
    assert rec.wait_idle(60)
    rec.stop()
    other.join(timeout=60)
    assert not errors, errors
    assert sorted(met) == ["recorder", "takeover"]
    assert _state(db) == MERGED_ONCE
    assert _statuses(db) == {OK_ID: "success", "m-f1": "failed", "m-f2": "failed"}
    assert db[dbm.JOURNAL].count_documents({}) == 0
