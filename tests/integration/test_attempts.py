"""Attempt records are group-committed: every mark is durable when ``mark`` returns, and marks
made while a write is running share the next write instead of queueing one write each."""

from __future__ import annotations

import threading

from consumer.attempts import AttemptLog
from creator.janitor import maybe_sent
from shared import db as dbm
from shared.clock import utcnow


def test_concurrent_marks_are_all_recorded_in_fewer_writes(db):
    log = AttemptLog(db, "c-attempts", utcnow)
    seen_durable: list[bool] = []
    start = threading.Barrier(12)

    def worker(k: int) -> None:
        start.wait()
        for j in range(5):
            ids = [f"m{k}-{j}-{x}" for x in range(3)]
            log.mark(f"c-attempts:g{k % 3}", ids)
            # Durable on return: the record already holds these ids.
            doc = db[dbm.ATTEMPTS].find_one({"_id": f"c-attempts:g{k % 3}", "ids": ids[0]})
            seen_durable.append(doc is not None)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    assert seen_durable == [True] * 60
    recorded = maybe_sent(db, "c-attempts")
    assert recorded == {f"m{k}-{j}-{x}" for k in range(12) for j in range(5) for x in range(3)}
    assert db[dbm.ATTEMPTS].count_documents({"consumer": "c-attempts"}) == 3
    assert log.writes < 60, log.writes  # marks queued behind a write shared the next one
    db[dbm.ATTEMPTS].delete_many({"consumer": "c-attempts"})
