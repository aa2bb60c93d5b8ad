"""What the planner reads and writes on MongoDB: users, reminders and registrations to plan
from, the messages it inserts, and the reads of its repairs (``creator/repairs.py``).

Each read is one index range or one lookup. Two rules of the MongoDB-compatible server here
(SecantusDB) shape them; a production MongoDB picks indexes by cost and applies projections in
the server, so there both rules only cost nothing:
- it picks an index by the filter's first field, so the indexed field is written first;
- it applies projections in Python, a fifth to a third slower than returning documents whole,
  so the chunk reads of a pass return whole documents.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from pymongo.database import Database
from pymongo.errors import BulkWriteError

from shared.domain.messages import Doc, Status
from shared.domain.plan import BUCKETS
from shared.store import db as dbm
from shared.store.abc_planning import Window

SCAN_THRESHOLD = 300  # above this many ids, one scan beats $in lookups (docs/architecture.md)
DUPLICATE_KEY = 11000


def _due_in(user_ids: Sequence[str], window: Window) -> Doc:
    """The filter of these users' messages due in the window: ``userId`` first, then the due
    range, for the index ``(userId, scheduledAt)``."""
    return {
        "userId": {"$in": list(user_ids)},
        "scheduledAt": {"$gte": window.start, "$lt": window.end},
    }


class MongoPlans:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database

    # -- what to plan from ---------------------------------------------------------------------
    def reminders_per_bucket(self) -> float:
        return self.db[dbm.REMINDERS].estimated_document_count() / BUCKETS

    def read_buckets(
        self, lo: int, hi: int
    ) -> tuple[list[Doc], dict[str, Doc], dict[str, list[Doc]]]:
        rng = {"bucket": {"$gte": lo, "$lt": hi}}
        reminders = list(self.db[dbm.REMINDERS].find({**rng, "active": True, "isDeleted": False}))
        users = {d["_id"]: d for d in self.db[dbm.USERS].find(rng)}
        tokens_by_user: dict[str, list[Doc]] = defaultdict(list)
        for t in self.db[dbm.TOKENS].find({**rng, "isActive": True}):
            tokens_by_user[t["userId"]].append(t)
        return reminders, users, tokens_by_user

    def active_reminders_of(self, user_ids: Sequence[str]) -> list[Doc]:
        flt: Doc = {"userId": {"$in": list(user_ids)}, "active": True, "isDeleted": False}
        return list(self.db[dbm.REMINDERS].find(flt))

    def users_by_id(self, ids: Collection[str]) -> dict[str, Doc]:
        return self._load(dbm.USERS, "_id", set(ids))

    def active_tokens_of(self, user_ids: Collection[str]) -> dict[str, Doc]:
        return self._load(dbm.TOKENS, "userId", set(user_ids), extra={"isActive": True})

    def _load(
        self, coll: str, key: str, ids: set[str], extra: dict[str, Any] | None = None
    ) -> dict[str, Doc]:
        """Documents whose ``key`` is in ids, keyed by ``_id``: $in for few, one scan for many."""
        if len(ids) <= SCAN_THRESHOLD:
            # The indexed field first: ``{isActive, userId}`` scanned every token here (21 ms at
            # 1,100 tokens).
            flt: dict[str, Any] = {key: {"$in": sorted(ids)}, **(extra or {})}
            return {d["_id"]: d for d in self.db[coll].find(flt)}
        flt = dict(extra or {})
        return {d["_id"]: d for d in self.db[coll].find(flt) if d.get(key) in ids}

    def reminder_versions(self, ids: Sequence[str]) -> dict[str, Doc]:
        flt = {"_id": {"$in": list(ids)}}
        proj = {"version": 1, "active": 1, "isDeleted": 1}
        return {r["_id"]: r for r in self.db[dbm.REMINDERS].find(flt, proj)}

    # -- messages ------------------------------------------------------------------------------
    def insert_messages(self, docs: list[Doc], chunk: int) -> tuple[int, list[Doc]]:
        inserted = 0
        duplicates: list[Doc] = []
        for i in range(0, len(docs), chunk):
            part = docs[i : i + chunk]
            try:
                res = self.db[dbm.MESSAGES].insert_many(part, ordered=False)
                inserted += len(res.inserted_ids)
            except BulkWriteError as exc:
                details = exc.details
                inserted += details.get("nInserted", 0)
                for err in details.get("writeErrors", []):
                    if err.get("code") != DUPLICATE_KEY:
                        raise
                    duplicates.append(part[err["index"]])
        return inserted, duplicates

    def existing_ids(self, ids: Collection[str]) -> set[str]:
        flt = {"_id": {"$in": sorted(ids)}}
        return {d["_id"] for d in self.db[dbm.MESSAGES].find(flt, {"_id": 1})}

    def planned_in_window(self, user_ids: Sequence[str], window: Window) -> list[Doc]:
        flt = _due_in(user_ids, window)
        flt["plannedAt"] = {"$lte": window.at}
        return list(self.db[dbm.MESSAGES].find(flt, {"userId": 1, "notificationTokenId": 1}))

    def pending_for_tokens(
        self, user_ids: Sequence[str], token_ids: Iterable[Any], window: Window
    ) -> list[Doc]:
        flt = _due_in(user_ids, window)
        flt.update(
            {
                "status": Status.PENDING.value,
                "isDeleted": False,
                "plannedAt": {"$lte": window.at},
                "notificationTokenId": {"$in": list(token_ids)},
            }
        )
        return list(self.db[dbm.MESSAGES].find(flt, {"notificationTokenId": 1}))

    # -- registrations -------------------------------------------------------------------------
    def token_ids_of(self, user_ids: Sequence[str]) -> set[Any]:
        flt = {"userId": {"$in": list(user_ids)}}
        return {t["_id"] for t in self.db[dbm.TOKENS].find(flt, {"_id": 1})}

    def inactive_tokens_of(self, user_ids: Sequence[str]) -> dict[Any, Doc]:
        flt = {"userId": {"$in": list(user_ids)}, "isActive": False}
        proj = {"userId": 1, "deactivationReason": 1}
        return {t["_id"]: t for t in self.db[dbm.TOKENS].find(flt, proj)}
