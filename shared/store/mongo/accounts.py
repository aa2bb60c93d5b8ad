"""The MongoDB adapter of the creator's accounts stores (``shared.store.abc_accounts``): users,
reminders (and the cancels of their versions' messages), and what an erasure scrubs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Any

from pymongo import UpdateMany, UpdateOne
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from shared.domain.messages import Doc, Status, terminal_update
from shared.store import db as dbm
from shared.store.abc import Ending
from shared.store.abc_accounts import StaleVersions, UserUpsert, VersionCancel
from shared.store.erasure import ERASED, anonymous
from shared.store.mongo.messages import ending_op

LOOKUP = 1000  # ids per lookup of users


class MongoUsers:
    """Users (``users``)."""

    def __init__(self, database: Database[Doc]) -> None:
        self.db = database

    def get(self, user_id: str, fields: Collection[str] | None = None) -> Doc | None:
        proj = dict.fromkeys(fields, 1) if fields is not None else None
        return self.db[dbm.USERS].find_one({"_id": user_id}, proj)

    def get_many(self, user_ids: Collection[str]) -> dict[str, Doc]:
        flt = {"_id": {"$in": sorted(user_ids)}}
        return {str(d["_id"]): d for d in self.db[dbm.USERS].find(flt)}

    def upsert(self, user_id: str, update: Doc, *, create: bool) -> Doc | None:
        # An update then a read by ``_id``, not ``find_one_and_update``: SecantusDB reads the
        # whole collection for a ``find_one_and_update`` even by ``_id`` (0.65 s at 100k users),
        # where MongoDB uses the ``_id`` index.
        self.db[dbm.USERS].update_one({"_id": user_id}, update, upsert=create)
        return self.get(user_id)

    def upsert_many(self, upserts: Sequence[UserUpsert]) -> set[str]:
        if not upserts:
            return set()
        ops = [UpdateOne({"_id": u.user_id}, u.update, upsert=u.create) for u in upserts]
        result = self.db[dbm.USERS].bulk_write(ops, ordered=False)
        return {str(u) for u in (result.upserted_ids or {}).values()}

    def insert_many(self, docs: Sequence[Doc]) -> set[int]:
        return dbm.insert_refused(self.db[dbm.USERS], list(docs))

    def delete(self, user_id: str) -> None:
        self.db[dbm.USERS].delete_one({"_id": user_id})


class MongoReminders:
    """Reminders (``reminders``), and the cancels of what their versions planned
    (``notification_messages``)."""

    def __init__(self, database: Database[Doc]) -> None:
        self.db = database

    def get(self, reminder_id: str) -> Doc | None:
        return self.db[dbm.REMINDERS].find_one({"_id": reminder_id})

    def get_many(self, reminder_ids: Collection[str]) -> dict[str, Doc]:
        flt = {"_id": {"$in": sorted(reminder_ids)}}
        return {str(d["_id"]): d for d in self.db[dbm.REMINDERS].find(flt)}

    def of_user(self, user_id: str, *, include_deleted: bool = False) -> list[Doc]:
        flt: Doc = {"userId": user_id}
        if not include_deleted:
            flt["isDeleted"] = False
        return list(self.db[dbm.REMINDERS].find(flt))

    def count_of_user(self, user_id: str) -> int:
        flt = {"userId": user_id, "isDeleted": False}
        return int(self.db[dbm.REMINDERS].count_documents(flt))

    def insert(self, doc: Doc) -> bool:
        try:
            self.db[dbm.REMINDERS].insert_one(doc)
        except DuplicateKeyError:
            return False
        return True

    def insert_many(self, docs: Sequence[Doc]) -> set[int]:
        return dbm.insert_refused(self.db[dbm.REMINDERS], list(docs))

    def compare_and_set(self, old: Doc, sets: Doc, now: dt.datetime) -> int | None:
        # ``createdAt`` too: a user erased and created again may hold the id at version 1 again.
        coll = self.db[dbm.REMINDERS]
        seen = int(old.get("version", 1))
        if "version" not in old:  # version 1 (as read everywhere), or $inc would make it 1 again
            coll.update_one(
                {"_id": old["_id"], "version": {"$exists": False}}, {"$set": {"version": 1}}
            )
        bumped = coll.update_one(
            {"_id": old["_id"], "version": seen, "createdAt": old.get("createdAt")},
            {"$set": {**sets, "updatedAt": now}, "$inc": {"version": 1}},
        )
        return seen + 1 if bumped.matched_count else None

    def compare_and_set_many(self, olds: Sequence[Doc], now: dt.datetime) -> None:
        # A bulk write does not say which filter matched: the caller reads back (``stamps``).
        coll = self.db[dbm.REMINDERS]
        unversioned = [o["_id"] for o in olds if "version" not in o]
        if unversioned:  # version 1 as read everywhere, or $inc would make it 1 again
            coll.update_many(
                {"_id": {"$in": unversioned}, "version": {"$exists": False}},
                {"$set": {"version": 1}},
            )
        ops = [
            UpdateOne(
                {
                    "_id": o["_id"],
                    "version": int(o.get("version", 1)),
                    "createdAt": o.get("createdAt"),
                },
                {"$set": {"updatedAt": now}, "$inc": {"version": 1}},
            )
            for o in olds
        ]
        if ops:
            coll.bulk_write(ops, ordered=False)

    def stamps(self, reminder_ids: Collection[str]) -> dict[str, tuple[int, Any]]:
        flt = {"_id": {"$in": sorted(reminder_ids)}}
        return {
            str(d["_id"]): (int(d.get("version", 1)), d.get("createdAt"))
            for d in self.db[dbm.REMINDERS].find(flt, {"version": 1, "createdAt": 1})
        }

    def cancel_at(self, cancels: Sequence[VersionCancel], reason: str, now: dt.datetime) -> int:
        ops = [
            UpdateMany(
                {
                    "scheduledAt": {"$in": list(c.instants)},
                    "status": Status.PENDING.value,
                    "isDeleted": False,
                    "reminderId": c.reminder_id,
                    "reminderVersion": {"$not": {"$gt": c.up_to}},
                },
                {"$set": terminal_update(Status.CANCELLED, reason, now)},
            )
            for c in cancels
            if c.instants
        ]
        if not ops:
            return 0
        return int(self.db[dbm.MESSAGES].bulk_write(ops, ordered=False).modified_count)

    def cancel_versions_before(self, stale: StaleVersions, reason: str, now: dt.datetime) -> int:
        res = self.db[dbm.MESSAGES].update_many(
            {
                "userId": stale.user_id,
                "scheduledAt": {"$gte": stale.since},
                "reminderId": stale.reminder_id,
                "status": Status.PENDING.value,
                "isDeleted": False,
                "reminderVersion": {"$not": {"$gte": stale.version}},
            },
            {"$set": terminal_update(Status.CANCELLED, reason, now)},
        )
        return int(res.modified_count)

    def delete(self, user_ids: Collection[str], reminder_ids: Collection[str] | None = None) -> int:
        flt: Doc = {"userId": {"$in": sorted(user_ids)}}
        if reminder_ids is not None:
            flt = {"_id": {"$in": sorted(reminder_ids)}, **flt}  # by _id first: point reads
        return int(self.db[dbm.REMINDERS].delete_many(flt).deleted_count)


class MongoErasure:
    """What an erasure scrubs (``notification_messages``, ``api_idempotency``) and who holds a
    user id (``users``)."""

    def __init__(self, database: Database[Doc]) -> None:
        self.db = database

    def scrub(
        self, user_id: str, now: dt.datetime, *, planned_before: dt.datetime | None = None
    ) -> tuple[int, int, str]:
        messages = self.db[dbm.MESSAGES]
        mine: Doc = {"userId": user_id}
        if planned_before is not None:
            mine["plannedAt"] = {"$lte": planned_before}
        ended = messages.update_many(
            {**mine, "status": {"$in": [Status.PENDING.value, Status.IS_MISSED.value]}},
            {"$set": terminal_update(Status.CANCELLED, ERASED, now)},
        ).modified_count
        pseudonym, blank = anonymous(now)
        anonymised = messages.update_many(mine, {"$set": blank}).modified_count
        return ended, anonymised, pseudonym

    def scrub_ids(self, ids: Collection[str], now: dt.datetime) -> tuple[int, str]:
        # By ``_id`` (the ``_id`` index): the ids are the caller's, of one user.
        pseudonym, blank = anonymous(now)
        if not ids:
            return 0, pseudonym
        messages = self.db[dbm.MESSAGES]
        ends = [
            ending_op(Ending(i, Status.CANCELLED, ERASED, now, expect=was))
            for i in ids
            for was in (Status.PENDING, Status.IS_MISSED)
        ]
        ended = messages.bulk_write(ends, ordered=False).modified_count
        messages.bulk_write([UpdateOne({"_id": i}, {"$set": blank}) for i in ids], ordered=False)
        return ended, pseudonym

    def incarnations(self, user_ids: Collection[str]) -> dict[str, Any]:
        # Lookups by id, ``LOOKUP`` at a time.
        ids = sorted(u for u in user_ids if isinstance(u, str))
        found: dict[str, Any] = {}
        for i in range(0, len(ids), LOOKUP):
            part = ids[i : i + LOOKUP]
            for d in self.db[dbm.USERS].find({"_id": {"$in": part}}, {"createdAt": 1}):
                found[d["_id"]] = d.get("createdAt")
        return found

    def planned_from(
        self, user_ids: Collection[str], field: str, values: Collection[Any]
    ) -> dict[str, list[Any]]:
        flt = {"userId": {"$in": sorted(user_ids)}, field: {"$in": sorted(values)}}
        ids: dict[str, list[Any]] = {}
        for d in self.db[dbm.MESSAGES].find(flt, {"userId": 1}):
            ids.setdefault(str(d["userId"]), []).append(d["_id"])
        return ids

    def forget_requests(self, user_id: str) -> int:
        # A request still running for the user finds its record gone and stores no answer.
        return int(self.db[dbm.IDEMPOTENCY].delete_many({"userId": user_id}).deleted_count)
