"""Send guards (``notification_sends``), fences (``consumer_fences``) and attempt records
(``send_attempts``) on MongoDB. The rule they serve is in ``shared/store/guards.py``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

import pymongo
from pymongo.database import Database
from pymongo.errors import BulkWriteError

from shared.domain.messages import Doc
from shared.store import db as dbm
from shared.store.abc import Guard


class MongoGuards:
    def __init__(self, database: Database[Doc]) -> None:
        self.sends = dbm.critical(database, dbm.SENDS)
        self.fences = dbm.critical(database, dbm.FENCES)
        self.attempts = database[dbm.ATTEMPTS]

    def take(
        self, ids: Sequence[str], owner: str, now: dt.datetime, wakeup: str | None = None
    ) -> set[str]:
        if not ids:
            return set()
        docs = [{"_id": i, "owner": owner, "wakeup": wakeup, "at": now} for i in ids]
        try:
            self.sends.insert_many(docs, ordered=False)
            return set(ids)
        except BulkWriteError as exc:
            lost = set()
            for err in exc.details.get("writeErrors", []):
                if err.get("code") != 11000:
                    raise
                lost.add(docs[err["index"]]["_id"])
            return set(ids) - lost

    def holder(self, message_id: str) -> Guard | None:
        doc = self.sends.find_one({"_id": message_id})
        return None if doc is None else Guard.of(doc)

    def take_over(self, guard: Guard, owner: str, now: dt.datetime, wakeup: str) -> bool:
        r = self.sends.update_one(
            {"_id": guard.id, "owner": guard.owner, "at": guard.at},
            {"$set": {"owner": owner, "at": now, "wakeup": wakeup, "takenOverFrom": guard.owner}},
        )
        return bool(r.modified_count)

    def release(self, ids: Collection[str], owner: str, *, budget_s: float | None = None) -> None:
        flt = {"_id": {"$in": list(ids)}, "owner": owner}
        if budget_s is None:
            self.sends.delete_many(flt)
        else:
            with pymongo.timeout(budget_s):
                self.sends.delete_many(flt)

    def fence(self, holder: str, by: str, now: dt.datetime) -> None:
        self.fences.update_one({"_id": holder}, {"$set": {"by": by, "at": now}}, upsert=True)

    def fenced_by(self, consumer: str) -> str | None:
        doc = self.fences.find_one({"_id": consumer}, {"by": 1})
        return None if doc is None else str(doc.get("by"))

    def record_attempt(
        self, record_id: str, consumer: str, at: dt.datetime, ids: Sequence[str]
    ) -> None:
        self.attempts.insert_one({"_id": record_id, "consumer": consumer, "at": at, "ids": ids})

    def maybe_sent(self, consumer: str) -> set[str]:
        return {i for d in self.attempts.find({"consumer": consumer}, {"ids": 1}) for i in d["ids"]}

    def in_attempt(self, consumer: object, message_id: str) -> bool:
        """Whether ``consumer`` has an attempt record naming the message (replays ask)."""
        found = self.attempts.find_one({"consumer": consumer, "ids": message_id}, {"_id": 1})
        return found is not None

    def drop_attempts(self, record_ids: Collection[str]) -> None:
        self.attempts.delete_many({"_id": {"$in": list(record_ids)}})
