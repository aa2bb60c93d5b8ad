"""The intent-change log (``intent_changes``), daily-cap counters (``notification_counters``)
and the current users and reminders by id, on MongoDB."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

from pymongo import UpdateOne
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from shared.domain.messages import Doc
from shared.store import db as dbm


class MongoIntentLog:
    def __init__(self, database: Database[Doc]) -> None:
        self.coll = database[dbm.CHANGES]

    def record(self, user_ids: Collection[str], now: dt.datetime, *, erased: bool = False) -> None:
        # One bulk write for any number of users: each write costs the server here a commit
        # (about 10 ms with its log synced on commit).
        sets = {"at": now, "erasedAt": now} if erased else {"at": now}
        ops = [UpdateOne({"_id": u}, {"$set": sets}, upsert=True) for u in sorted(set(user_ids))]
        if ops:
            self.coll.bulk_write(ops, ordered=False)

    def changed_since(self, since: dt.datetime) -> set[str]:
        cur = self.coll.find({"at": {"$gte": since}}, {"_id": 1})
        return {d["_id"] for d in cur if isinstance(d["_id"], str)}

    def erased_since(self, user_ids: Collection[str], since: dt.datetime) -> set[str]:
        """Which of ``user_ids`` were stamped erased at or after ``since``."""
        if not user_ids:
            return set()
        flt = {"_id": {"$in": sorted(user_ids)}, "erasedAt": {"$gte": since}}
        return {str(d["_id"]) for d in self.coll.find(flt, {"_id": 1})}


class MongoCapCounters:
    def __init__(self, database: Database[Doc]) -> None:
        self.coll = database[dbm.COUNTERS]

    def reserve(self, key: str, user_id: str, want: int, limit: int, now: dt.datetime) -> bool:
        # One conditional increment by ``_id``; a counter with too little room makes the upsert
        # collide with it (a duplicate key). Not a find_one_and_update: the server here reads
        # every counter of every day for one (1.4 to 1.9 s at 200,000 documents); plain
        # MongoDB would use the ``_id`` index.
        try:
            self.coll.update_one(
                {"_id": key, "count": {"$lte": limit - want}},
                {"$inc": {"count": want}, "$setOnInsert": {"userId": user_id, "at": now}},
                upsert=True,
            )
            return True
        except DuplicateKeyError:
            return False

    def count(self, key: str) -> int:
        doc = self.coll.find_one({"_id": key}, {"count": 1}) or {}
        return int(doc.get("count", 0))

    def refund(self, refunds: Sequence[tuple[str, str]]) -> None:
        # One write for all: failures are rare, each a guarded update.
        ops = [
            UpdateOne(
                {"_id": counter, "refunded": {"$ne": message_id}},
                {"$inc": {"count": -1}, "$push": {"refunded": message_id}},
            )
            for counter, message_id in refunds
        ]
        if ops:
            self.coll.bulk_write(ops, ordered=False)

    def erase_user(self, user_id: str, now: dt.datetime) -> int:
        """Delete the user's daily-cap counters (an erasure); how many.

        By their ``userId`` (an index). Counters made before they carried it are given theirs
        first, from their ``_id``: found through the same index (``userId: null``), so once
        they are done the look finds nothing, and not by an ``_id`` prefix, which reads every
        counter on the server here (plain MongoDB would use the ``_id`` index for a prefix)."""
        legacy: list[UpdateOne] = []
        for d in self.coll.find({"userId": None}, {"_id": 1}):
            user = str(d["_id"]).rpartition(":")[0]
            legacy.append(
                UpdateOne({"_id": d["_id"], "userId": None}, {"$set": {"userId": user, "at": now}})
            )
            if len(legacy) == LEGACY_CHUNK:
                self.coll.bulk_write(legacy, ordered=False)
                legacy = []
        if legacy:
            self.coll.bulk_write(legacy, ordered=False)
        return self.coll.delete_many({"userId": user_id}).deleted_count


LEGACY_CHUNK = 1000  # counters given their user per write (the first erasure after an upgrade)


class MongoCurrentIntent:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database

    def _by_id(self, coll: str, ids: Collection[str]) -> dict[str, Doc]:
        if not ids:
            return {}
        return {d["_id"]: d for d in self.db[coll].find({"_id": {"$in": sorted(ids)}})}

    def users(self, ids: Collection[str]) -> dict[str, Doc]:
        return self._by_id(dbm.USERS, ids)

    def reminders(self, ids: Collection[str]) -> dict[str, Doc]:
        return self._by_id(dbm.REMINDERS, ids)
