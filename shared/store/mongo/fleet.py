"""The registry of live senders on MongoDB (``expo_senders``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from pymongo.database import Database

from shared.domain.messages import Doc
from shared.store import db as dbm


class MongoSenders:
    def __init__(self, database: Database[Doc]) -> None:
        self.coll = database[dbm.SENDERS]

    def beat(
        self, sender_id: str, now: dt.datetime, fields: Mapping[str, Any], first: Mapping[str, Any]
    ) -> None:
        self.coll.update_one(
            {"_id": sender_id},
            {"$set": {"heartbeatAt": now, **fields}, "$setOnInsert": dict(first)},
            upsert=True,
        )

    def live_since(self, since: dt.datetime) -> list[Doc]:
        return list(self.coll.find({"heartbeatAt": {"$gte": since}}))

    def leave(self, sender_id: str) -> None:
        self.coll.delete_one({"_id": sender_id})
