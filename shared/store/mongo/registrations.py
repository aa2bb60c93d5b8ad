"""The MongoDB adapter of the registrations stores (``shared.store.abc_registrations``):
device registrations (``notification_tokens``) as logins and erasures write them, and the
intent-change log (``intent_changes``) with the daily-cap counters an erasure removes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from shared.domain.messages import Doc
from shared.store import db as dbm
from shared.store.mongo.intent import MongoCapCounters, MongoIntentLog
from shared.store.mongo.tokens import MongoTokens


class MongoRegistrations:
    def __init__(self, database: Database[Doc]) -> None:
        self.coll = database[dbm.TOKENS]
        self.tokens = MongoTokens(database)  # the reads and deactivation the consumer shares

    def active_for(self, device: str, token: str) -> list[Doc]:
        return self.tokens.active_for(device, token)

    def active_holding(self, devices: Collection[str], strings: Collection[str]) -> list[Doc]:
        # Two indexed lookups merged here, not one ``$or``, as ``MongoTokens.active_for``: the
        # server here scans the whole collection for an ``$or``; plain MongoDB would merge the
        # two index scans itself.
        found = {
            d["_id"]: d
            for d in self.coll.find({"deviceId": {"$in": sorted(devices)}, "isActive": True})
        }
        for d in self.coll.find({"token": {"$in": sorted(strings)}, "isActive": True}):
            found.setdefault(d["_id"], d)
        return list(found.values())

    def of_user(self, user_id: str) -> list[Doc]:
        return list(self.coll.find({"userId": user_id}).sort("createdAt", 1))

    def insert(self, doc: Doc) -> bool:
        try:
            self.coll.insert_one(doc)
        except DuplicateKeyError:
            return False
        return True

    def insert_many(self, docs: Sequence[Doc]) -> set[int]:
        if not docs:
            return set()  # the driver refuses an empty insert
        return dbm.insert_refused(self.coll, list(docs))

    def deactivate(self, token_ids: Collection[str], reason: str, now: dt.datetime) -> list[Doc]:
        return self.tokens.deactivate(token_ids, reason, now)

    def deactivate_holding(
        self, reason: str, now: dt.datetime, *, token: str | None, device: str | None
    ) -> list[Doc]:
        flt: Doc = {}
        if token is not None:
            flt["token"] = token
        if device is not None:
            flt["deviceId"] = device
        if not flt:
            raise ValueError("deactivate_holding needs a token string or a device id")
        return self.tokens.deactivate_matching(flt, reason, now)

    def deactivate_login(
        self, user_id: str, device: str, reason: str, now: dt.datetime
    ) -> list[Doc]:
        flt: Doc = {"userId": user_id, "deviceId": device}
        return self.tokens.deactivate_matching(flt, reason, now)

    def deactivate_of_user(self, user_id: str, reason: str, now: dt.datetime) -> list[Doc]:
        return self.tokens.deactivate_matching({"userId": user_id}, reason, now)

    def deactivate_ids_of(
        self, token_ids: Collection[str], user_ids: Collection[str], reason: str, now: dt.datetime
    ) -> list[Doc]:
        return self.tokens.deactivate_matching(_ids_of(token_ids, user_ids), reason, now)

    def delete_of_user(self, user_id: str) -> int:
        return int(self.coll.delete_many({"userId": user_id}).deleted_count)

    def delete_ids_of(self, token_ids: Collection[str], user_ids: Collection[str]) -> int:
        return int(self.coll.delete_many(_ids_of(token_ids, user_ids)).deleted_count)


def _ids_of(token_ids: Collection[str], user_ids: Collection[str]) -> Doc:
    return {"_id": {"$in": sorted(token_ids)}, "userId": {"$in": sorted(user_ids)}}


class MongoChanges(MongoIntentLog):
    def __init__(self, database: Database[Doc]) -> None:
        super().__init__(database)
        self.counters = MongoCapCounters(database)

    def erase_counters(self, user_id: str) -> int:
        # The wall clock, not a caller's: ``at`` is what the counters' TTL index compares with
        # the server's clock, for counters given their user here.
        return self.counters.erase_user(user_id, dt.datetime.now(dt.UTC))
