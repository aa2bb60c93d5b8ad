"""Pending messages by due instant on MongoDB (``notification_messages``), the send guards on
them (``notification_sends``), their ends, the server's clock and stopped replays: what a
re-arm reads (``creator/rearm.py``), what the janitor reads and ends (``creator/janitor.py``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Generator, Sequence

from pymongo.cursor import Cursor
from pymongo.database import Database

from shared.domain.messages import Doc, Status
from shared.store import db as dbm
from shared.store import replays
from shared.store.abc import ConsumerStores, Ending, Guard
from shared.store.abc_replays import ReplayStores
from shared.store.mongo.messages import ending_op
from shared.store.mongo.replays import MongoReplays


def _pending(start: dt.datetime, end: dt.datetime) -> Doc:
    return {
        "status": Status.PENDING.value,
        "isDeleted": False,
        "scheduledAt": {"$gte": start, "$lt": end},
    }


def _closing(cursor: Cursor[Doc]) -> Generator[Doc, None, None]:
    """``cursor``'s documents; closing the generator closes the cursor."""
    try:
        yield from cursor
    finally:
        cursor.close()


class MongoPending:
    def __init__(self, database: Database[Doc], consumer: ConsumerStores) -> None:
        self.db = database
        self._consumer = consumer

    @property
    def name(self) -> str:
        return self.db.name

    @property
    def consumer(self) -> ConsumerStores:
        return self._consumer

    def due(self, start: dt.datetime, end: dt.datetime, batch: int) -> Generator[Doc, None, None]:
        coll = self.db[dbm.MESSAGES]
        return _closing(coll.find(_pending(start, end)).sort("scheduledAt", 1).batch_size(batch))

    def due_fields(
        self, start: dt.datetime, end: dt.datetime, fields: Sequence[str]
    ) -> Generator[Doc, None, None]:
        return _closing(self.db[dbm.MESSAGES].find(_pending(start, end), dict.fromkeys(fields, 1)))

    def count_due(self, start: dt.datetime, end: dt.datetime) -> int:
        return self.db[dbm.MESSAGES].count_documents(_pending(start, end))

    def guards_on(self, ids: Collection[str]) -> list[Guard]:
        flt = {"_id": {"$in": sorted(ids)}}
        return [Guard.of(g) for g in self.db[dbm.SENDS].find(flt, {"owner": 1, "at": 1})]

    def end(self, endings: Sequence[Ending]) -> int:
        if not endings:
            return 0
        ops = [ending_op(e) for e in endings]
        return dbm.critical(self.db, dbm.MESSAGES).bulk_write(ops, ordered=False).modified_count

    def server_now(self) -> dt.datetime | None:
        clock = dbm.server_clock(self.db)
        return None if clock is None else clock.server

    def settle_stale_replays(self, now: dt.datetime, settler: str) -> int:
        stores = ReplayStores(MongoReplays(self.db), self._consumer)
        settled = replays.settle_stale(stores, now, settler)
        return len(settled.missed) + len(settled.unknown)
