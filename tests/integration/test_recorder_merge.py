"""A herd's outcomes are merged in parts: short writes, each part's batches completed as soon
as it is in, and a journal document deleted only once every job it holds is merged."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import consumer.recorder as recorder_mod
from consumer.recorder import Job, Recorder
from shared.store import db as dbm


def row(mid: str, due_ms: int) -> list[Any]:
    # recorder.ROW_FIELDS: id, ok, ticket, error, message, attempts, token, user, cap, ld, due
    return [
        mid,
        True,
        f"tk-{mid}",
        None,
        None,
        1,
        f"t-{mid}",
        f"u-{mid}",
        False,
        "20261130",
        due_ms,
    ]


def test_a_big_merge_goes_in_parts_and_keeps_shared_journal_documents(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder_mod, "MERGE_CHUNK", 250)
    dbm.ensure_indexes(db)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    due_ms = int(now.timestamp() * 1000)
    ids = [f"rm-{i:04d}" for i in range(1200)]
    db[dbm.MESSAGES].insert_many(
        [
            {
                "_id": i,
                "userId": f"u-{i}",
                "status": "pending",
                "isDeleted": False,
                "scheduledAt": now,
            }
            for i in ids
        ]
    )
    rec = Recorder(db, clock=lambda: now, consumer="c-merge", busy=lambda: True)
    jobs: list[Job] = []
    parts: list[int] = []
    complete = rec._complete

    def spy(part: list[Job]) -> None:
        parts.append(sum(len(j.journal or []) for j in part))
        complete(part)
        assert [id(j) for j in jobs[: len(part)]] == [id(j) for j in part]  # in queue order
        del jobs[: len(part)]
        # Every job not merged yet still has its journal document (it survives a crash now).
        waiting = {j.journal_id for j in jobs}
        have = {d["_id"] for d in db[dbm.JOURNAL].find({"_id": {"$in": list(waiting)}})}
        assert have == waiting

    monkeypatch.setattr(rec, "_complete", spy)
    closed: list[str] = []
    for k in range(12):  # 12 requests of 100 outcomes, journaled, merged only on stop (busy)
        chunk = ids[k * 100 : (k + 1) * 100]
        job = Job(
            outcomes=[("meal", "success")] * 100,
            journal=[row(m, due_ms) for m in chunk],
            journal_at=now,
            done=lambda c=chunk: closed.extend(c),
        )
        jobs.append(job)
        rec.put(job)
    rec.stop(timeout=60)

    assert jobs == [] and sum(parts) == 1200 and max(parts) <= 250 and len(parts) >= 5, parts
    assert db[dbm.JOURNAL].count_documents({"consumer": "c-merge"}) == 0
    assert sorted(closed) == ids
    statuses = {d["status"] for d in db[dbm.MESSAGES].find({"_id": {"$in": ids}}, {"status": 1})}
    assert statuses == {"success"}
    db[dbm.MESSAGES].delete_many({"_id": {"$in": ids}})
