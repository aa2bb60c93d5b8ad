"""Registrations (``notification_tokens``) on MongoDB: reads, deactivation, failure counts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Any

from pymongo.database import Database

from shared.domain.messages import Doc
from shared.store import db as dbm


class MongoTokens:
    def __init__(self, database: Database[Doc]) -> None:
        self.coll = database[dbm.TOKENS]

    def by_ids(self, ids: Collection[str]) -> dict[str, Doc]:
        if not ids:
            return {}
        return {d["_id"]: d for d in self.coll.find({"_id": {"$in": sorted(ids)}})}

    def deactivate(self, token_ids: Collection[str], reason: str, now: dt.datetime) -> list[Doc]:
        return self.deactivate_matching({"_id": {"$in": sorted(token_ids)}}, reason, now)

    def deactivate_matching(self, flt: dict[str, Any], reason: str, now: dt.datetime) -> list[Doc]:
        """Turn off every active registration matching the filter ``flt``, each by a
        compare-and-set on ``isActive``; those this call turned off (``_id``, ``userId``)."""
        hit = list(self.coll.find({**flt, "isActive": True}, {"userId": 1}))
        off: list[Doc] = []
        for t in hit:
            r = self.coll.update_one(
                {"_id": t["_id"], "isActive": True},
                {
                    "$set": {
                        "isActive": False,
                        "deactivatedAt": now,
                        "deactivationReason": reason,
                        "updatedAt": now,
                    }
                },
            )
            if r.modified_count:
                off.append(t)
        return off

    def active_for(self, device: str, token: str) -> list[Doc]:
        """The active registrations of this device id or of this token string.

        Two indexed lookups merged here, not one ``$or``: the MongoDB-compatible server used
        here scans the whole collection for an ``$or`` (18 ms at 1,000 tokens, growing with
        them), where plain MongoDB would merge the two index scans itself."""
        found = {d["_id"]: d for d in self.coll.find({"deviceId": device, "isActive": True})}
        for d in self.coll.find({"token": token, "isActive": True}):
            found.setdefault(d["_id"], d)
        return list(found.values())

    def count_failure(
        self, token_id: str, at: dt.datetime, message_id: str | None, now: dt.datetime
    ) -> Doc | None:
        # An update then a read by _id, not a find_one_and_update, and ``$not`` rather than
        # an ``$or`` with ``$exists``: the server here reads every registration for either
        # (1.4 to 3 s at 200,000 documents), once per failed push; plain MongoDB would use the
        # ``_id`` index for both. ``$not: {$gt}`` also counts a failure when the reset instant
        # is missing or not a date.
        flt: Doc = {"_id": token_id, "failureResetAt": {"$not": {"$gt": at}}}
        update: Doc = {
            "$inc": {"failureCount": 1},
            "$max": {"lastFailureAt": at},
            "$set": {"updatedAt": now},
        }
        if message_id:
            flt["failedMessages"] = {"$ne": message_id}
            update["$push"] = {"failedMessages": message_id}
        if self.coll.update_one(flt, update).matched_count:
            return self.coll.find_one({"_id": token_id})
        if message_id:  # counted before? its deactivation may be due
            return self.coll.find_one({"_id": token_id, "failedMessages": message_id})
        return None

    def failing(self) -> set[str]:
        # Only tokens that have failures need a reset: a small partial index finds them.
        cur = self.coll.find({"failureCount": {"$gt": 0}}, {"_id": 1}).hint("failing_tokens")
        return {d["_id"] for d in cur}

    def reset_failures(self, token_id: str, at: dt.datetime, now: dt.datetime) -> bool:
        r = self.coll.update_one(
            {
                "_id": token_id,
                "failureCount": {"$gt": 0},
                "lastFailureAt": {"$not": {"$gt": at}},  # not an ``$or``: see count_failure
            },
            {
                "$set": {"failureCount": 0, "failedMessages": [], "updatedAt": now},
                "$max": {"failureResetAt": at},
            },
        )
        return bool(r.modified_count)
