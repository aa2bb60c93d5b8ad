"""Attempt records are group-committed: every mark is durable when ``mark`` returns, and marks
made while a write is running share the next write instead of queueing one write each. A record
is released only when every due group it holds ids of has been released."""

from __future__ import annotations

import threading

from consumer.attempts import AttemptLog
from shared.clock import utcnow
from shared.store import db as dbm
from shared.store.guards import maybe_sent


def test_concurrent_marks_are_all_recorded_in_fewer_writes(db):
    log = AttemptLog(db, "c-attempts", utcnow)
    seen_durable: list[bool] = []
    start = threading.Barrier(12)

    def worker(k: int) -> None:
        start.wait()
        for j in range(5):
            ids = [f"m{k}-{j}-{x}" for x in range(3)]
            log.mark(f"c-attempts:g{k % 3}", ids)
            # Durable on return: a record of this consumer already holds these ids.
            doc = db[dbm.ATTEMPTS].find_one({"consumer": "c-attempts", "ids": ids[0]})
            seen_durable.append(doc is not None)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    assert seen_durable == [True] * 60
    recorded = maybe_sent(db, "c-attempts")
    assert recorded == {f"m{k}-{j}-{x}" for k in range(12) for j in range(5) for x in range(3)}
    assert db[dbm.ATTEMPTS].count_documents({"consumer": "c-attempts"}) == log.writes
    assert log.writes < 60, log.writes  # marks queued behind a write shared the next one
    db[dbm.ATTEMPTS].delete_many({"consumer": "c-attempts"})


def test_a_record_is_free_only_when_every_group_in_it_is_released(db):
    log = AttemptLog(db, "c-release", utcnow)
    # Sequential marks: one record each, free as soon as its one group is released.
    log.mark("a", ["a1"])
    log.mark("b", ["b1"])
    records = {d["_id"]: d["ids"] for d in db[dbm.ATTEMPTS].find({"consumer": "c-release"})}
    assert sorted(records.values()) == [["a1"], ["b1"]]
    assert log.release("b") == [k for k, v in records.items() if v == ["b1"]]
    assert log.release("b") == []  # released once

    # One record holding two groups' ids: both marks queue behind a write said to be running,
    # and whichever thread writes next writes both.
    log._writing = True
    done: list[str] = []
    ts = [
        threading.Thread(target=lambda m=m: (log.mark(m, [f"{m}1"]), done.append(m)))
        for m in ("c", "d")
    ]
    for t in ts:
        t.start()
    while len(log._queued) < 2:
        threading.Event().wait(0.01)
    with log._cv:
        log._writing = False
        log._cv.notify_all()
    for t in ts:
        t.join(10)
    assert sorted(done) == ["c", "d"]
    shared = [d for d in db[dbm.ATTEMPTS].find({"consumer": "c-release"}) if len(d["ids"]) == 2]
    assert len(shared) == 1 and sorted(shared[0]["ids"]) == ["c1", "d1"]
    assert log.release("c") == []  # d's ids are in it too: still needed
    assert log.release("d") == [shared[0]["_id"]]
    db[dbm.ATTEMPTS].delete_many({"consumer": "c-release"})
