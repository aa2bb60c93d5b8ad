"""Replays on MongoDB (``notification_messages``, ``send_attempts``, ``notification_counters``):
taking, handing over, holding, giving back and fencing messages for a replay run, its attempt
records, and the daily-cap reservations it gives back. The rules they serve are in
``shared.store.replays``; each write on a held message is a compare-and-set on its own message.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database

from shared.domain.messages import Doc, Status
from shared.store import db as dbm
from shared.store.abc_replays import HeldWrite


def held(message_id: str, holder: str) -> Doc:
    """The filter of a write by ``holder`` on a message it holds."""
    return {"_id": message_id, "status": Status.REPLAYING.value, "replay.holder": holder}


def held_op(w: HeldWrite) -> UpdateOne:
    """``w`` as an update of its message, only while its holder holds it."""
    update: Doc = {"$set": dict(w.fields)}
    if w.unset:
        update["$unset"] = dict.fromkeys(w.unset, "")
    if w.attempts is not None:
        update["$inc"] = {"attempts": w.attempts}
    return UpdateOne(held(w.id, w.holder), update)


class MongoReplays:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database
        self.messages = database[dbm.MESSAGES]

    def selected(self, query: Doc) -> list[Doc]:
        # A failed selection's causes are not in ``query`` (``Selection.query``: status and due
        # range, through the partial index ``failed_by_time``) but judged by the caller
        # (``Selection.takes``): as an ``$or`` of ``errorCode`` and ``receipt.error`` the server
        # here reads every message. Plain MongoDB reads the range through the index and applies
        # the ``$or`` to what it reads.
        return list(self.messages.find(query))

    def take(self, message_id: str, origin: Status, also: Mapping[str, Any], record: Doc) -> bool:
        res = self.messages.update_one(
            {"_id": message_id, "status": origin.value, **also},
            {"$set": {"status": Status.REPLAYING.value, "replay": record}},
        )
        return res.modified_count == 1

    def hand_over(
        self, run: str, ids: Collection[str], holder: str, lease_until: dt.datetime
    ) -> list[Doc]:
        ids = list(ids)
        self.messages.update_many(
            {"_id": {"$in": ids}, "status": Status.REPLAYING.value, "replay.holder": run},
            {
                "$set": {
                    "replay.holder": holder,
                    "replay.sender": holder,
                    "replay.leaseUntil": lease_until,
                }
            },
        )
        return list(
            self.messages.find(
                {"_id": {"$in": ids}, "status": Status.REPLAYING.value, "replay.holder": holder}
            )
        )

    def holds(self, holder: str, ids: Collection[str]) -> int:
        return self.messages.count_documents(
            {"_id": {"$in": list(ids)}, "status": Status.REPLAYING.value, "replay.holder": holder}
        )

    def forget_attempts(self, run: str) -> None:
        self.db[dbm.ATTEMPTS].delete_many({"consumer": run})

    def write(self, writes: Sequence[HeldWrite]) -> None:
        if writes:
            self.messages.bulk_write([held_op(w) for w in writes], ordered=False)

    def fence(self, holder: str | None, fence: str, taken_before: dt.datetime | None) -> list[Doc]:
        flt: Doc = {"status": Status.REPLAYING.value, "replay.holder": holder}
        if holder is None and taken_before is not None:
            flt["replay.at"] = {"$not": {"$gte": taken_before}}
        self.messages.update_many(flt, {"$set": {"replay.holder": fence}})
        return list(
            self.messages.find(
                {"status": Status.REPLAYING.value, "replay.holder": fence},
                {"replay.run": 1, "replay.at": 1, "replay.from": 1, "replay.sender": 1},
            )
        )

    def replaying(self) -> list[Doc]:
        # Served by the partial index ``replaying`` (only messages in that status are in it).
        return list(
            self.messages.find(
                {"status": Status.REPLAYING.value}, {"replay.holder": 1, "replay.leaseUntil": 1}
            )
        )

    def give_back(self, counters: Sequence[str]) -> None:
        for key in counters:
            self.db[dbm.COUNTERS].update_one({"_id": key}, {"$inc": {"count": -1}})
