"""Messages on MongoDB (``notification_messages``): the consumer's reads and terminal writes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database

from shared.domain.messages import Doc, Status, terminal_update
from shared.store import db as dbm
from shared.store.abc import Ending, Outcome

# Outcomes per write: ~0.7 s of the MongoDB-compatible server here (1.5 ms per update).
MERGE_CHUNK = 500


def ending_op(e: Ending) -> UpdateOne:
    """The compare-and-set update of one terminal write."""
    return UpdateOne(
        {"_id": e.id, "status": e.expect.value},
        {"$set": terminal_update(e.status, e.reason, e.at, **e.fields)},
    )


class MongoMessages:
    def __init__(self, database: Database[Doc]) -> None:
        self.coll = dbm.critical(database, dbm.MESSAGES)

    def pending_ids(self, start: dt.datetime, end: dt.datetime) -> frozenset[str]:
        cur = self.coll.find(
            {
                "status": Status.PENDING.value,
                "isDeleted": False,
                "scheduledAt": {"$gte": start, "$lte": end},
            },
            {"_id": 1},
            # No .hint(): SecantusDB 0.7 ignores the scheduledAt bounds of a hinted range and
            # walks the whole partial index (~0.1 ms per pending message: ~1 s at 10k, ~10 s at
            # 100k); unhinted, its planner picks the same index with the bounds (8 ms for a 60 s
            # window at 10k pending). Plain MongoDB uses the bounds either way.
        )
        return frozenset(d["_id"] for d in cur)

    def statuses(self, ids: Collection[str]) -> dict[str, str]:
        if not ids:
            return {}
        cur = self.coll.find({"_id": {"$in": list(ids)}}, {"status": 1})
        return {d["_id"]: str(d.get("status")) for d in cur}

    def get(self, message_id: str) -> Doc | None:
        return self.coll.find_one({"_id": message_id})

    def end(self, endings: Sequence[Ending]) -> int:
        n = 0
        for i in range(0, len(endings), MERGE_CHUNK):
            ops = [ending_op(e) for e in endings[i : i + MERGE_CHUNK]]
            n += self.coll.bulk_write(ops, ordered=False).modified_count
        return n

    def apply(self, outcomes: Sequence[Outcome]) -> None:
        # Short writes: a 10k herd in one bulk write took ~15 s here (see Recorder._merge_all).
        for i in range(0, len(outcomes), MERGE_CHUNK):
            ops = [
                UpdateOne({"_id": o.id, "finishedAt": {"$ne": o.at}}, {"$set": dict(o.fields)})
                for o in outcomes[i : i + MERGE_CHUNK]
            ]
            self.coll.bulk_write(ops, ordered=False)

    def receipts_due(self, now: dt.datetime, limit: int) -> list[Doc]:
        return list(
            self.coll.find(
                {"receipt.state": "pending", "receipt.checkAfter": {"$lte": now}},
                {"ticketId": 1, "notificationTokenId": 1, "userId": 1, "sentAt": 1},
            ).limit(limit)
        )

    def set_fields(self, changes: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        if changes:
            ops = [UpdateOne({"_id": i}, {"$set": dict(f)}) for i, f in changes]
            self.coll.bulk_write(ops, ordered=False)
