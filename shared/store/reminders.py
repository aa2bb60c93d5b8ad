"""Reminder documents as the management writers need them: read, create, compare-and-set.

A reminder carries a ``version`` (1 when missing, as everywhere). Every change is a
compare-and-set on the version (and ``createdAt``) its writer read, so two changes of one
reminder are applied one after the other, never one over the other; the messages planned from
a version carry it as ``reminderVersion``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Any

from pymongo import UpdateMany, UpdateOne
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from shared.domain.messages import Doc, Status, terminal_update
from shared.store import db as dbm


def get(database: Database[Doc], reminder_id: str) -> Doc | None:
    """The stored reminder, or None."""
    return database[dbm.REMINDERS].find_one({"_id": reminder_id})


def of_user(database: Database[Doc], user_id: str, *, include_deleted: bool = False) -> list[Doc]:
    """The user's reminders (removed ones too with ``include_deleted``)."""
    flt: Doc = {"userId": user_id}
    if not include_deleted:
        flt["isDeleted"] = False
    return list(database[dbm.REMINDERS].find(flt))


def count_of_user(database: Database[Doc], user_id: str) -> int:
    """How many reminders the user has (removed ones not counted)."""
    return int(database[dbm.REMINDERS].count_documents({"userId": user_id, "isDeleted": False}))


def insert(database: Database[Doc], doc: Doc) -> bool:
    """Insert a new reminder; False when its id is taken (a concurrent create won)."""
    try:
        database[dbm.REMINDERS].insert_one(doc)
    except DuplicateKeyError:
        return False
    return True


def compare_and_set(database: Database[Doc], old: Doc, sets: Doc, now: dt.datetime) -> int | None:
    """Write ``sets`` over the reminder if it is still the version ``old`` is (same version and
    ``createdAt``: a user erased and created again may hold the id at version 1 again); the
    version becomes the next. Returns the new version, or None when another change got in."""
    coll = database[dbm.REMINDERS]
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


def compare_and_set_many(database: Database[Doc], olds: list[Doc], now: dt.datetime) -> None:
    """``compare_and_set`` of each of ``olds`` with no other field, in one write (unordered):
    each reminder still the version read goes to the next. Which did is read back by the caller
    (``stamps``): a bulk write does not say which filter matched."""
    coll = database[dbm.REMINDERS]
    unversioned = [o["_id"] for o in olds if "version" not in o]
    if unversioned:  # version 1 as read everywhere, or $inc would make it 1 again
        coll.update_many(
            {"_id": {"$in": unversioned}, "version": {"$exists": False}}, {"$set": {"version": 1}}
        )
    ops = [
        UpdateOne(
            {"_id": o["_id"], "version": int(o.get("version", 1)), "createdAt": o.get("createdAt")},
            {"$set": {"updatedAt": now}, "$inc": {"version": 1}},
        )
        for o in olds
    ]
    if ops:
        coll.bulk_write(ops, ordered=False)


def stamps(database: Database[Doc], reminder_ids: Collection[str]) -> dict[str, tuple[int, Any]]:
    """The stored (version, createdAt) of each of these reminders that exists."""
    flt = {"_id": {"$in": sorted(reminder_ids)}}
    return {
        str(d["_id"]): (int(d.get("version", 1)), d.get("createdAt"))
        for d in database[dbm.REMINDERS].find(flt, {"version": 1, "createdAt": 1})
    }


def cancel_at_many(
    database: Database[Doc],
    cancels: list[tuple[str, int, list[dt.datetime]]],
    reason: str,
    now: dt.datetime,
) -> int:
    """``cancel_at`` for each (reminder id, up to version, instants), in one write; how many."""
    ops = [
        UpdateMany(
            {
                "scheduledAt": {"$in": instants},
                "status": Status.PENDING.value,
                "isDeleted": False,
                "reminderId": rid,
                "reminderVersion": {"$not": {"$gt": up_to}},
            },
            {"$set": terminal_update(Status.CANCELLED, reason, now)},
        )
        for rid, up_to, instants in cancels
        if instants
    ]
    if not ops:
        return 0
    return int(database[dbm.MESSAGES].bulk_write(ops, ordered=False).modified_count)


def versions(database: Database[Doc], reminder_ids: Collection[str]) -> dict[str, int]:
    """The stored version of each of these reminders that exists (1 when missing)."""
    flt = {"_id": {"$in": sorted(reminder_ids)}}
    return {
        str(d["_id"]): int(d.get("version", 1))
        for d in database[dbm.REMINDERS].find(flt, {"version": 1})
    }


def cancel_versions_before(
    database: Database[Doc],
    user_id: str,
    reminder_id: str,
    version: int,
    since: dt.datetime,
    reason: str,
    now: dt.datetime,
) -> int:
    """End ``cancelled`` every pending message of the reminder due at or after ``since`` that
    was planned from a version before ``version``; returns how many ended."""
    res = database[dbm.MESSAGES].update_many(
        {
            "userId": user_id,
            "scheduledAt": {"$gte": since},
            "reminderId": reminder_id,
            "status": Status.PENDING.value,
            "isDeleted": False,
            "reminderVersion": {"$not": {"$gte": version}},
        },
        {"$set": terminal_update(Status.CANCELLED, reason, now)},
    )
    return int(res.modified_count)


def cancel_at(
    database: Database[Doc],
    reminder_id: str,
    up_to_version: int,
    instants: list[dt.datetime],
    reason: str,
    now: dt.datetime,
) -> int:
    """End ``cancelled`` the reminder's pending messages at these instants planned from a
    version up to ``up_to_version`` (a later one may be planned there already); how many."""
    return cancel_at_many(database, [(reminder_id, up_to_version, instants)], reason, now)


def delete(database: Database[Doc], reminder_ids: Collection[str], users: Collection[str]) -> int:
    """Delete these reminders of these users; how many."""
    flt: Any = {"_id": {"$in": sorted(reminder_ids)}, "userId": {"$in": sorted(users)}}
    return int(database[dbm.REMINDERS].delete_many(flt).deleted_count)


def delete_of_user(database: Database[Doc], user_id: str) -> int:
    """Delete all of the user's reminders (an erasure); how many."""
    return int(database[dbm.REMINDERS].delete_many({"userId": user_id}).deleted_count)


def insert_many(database: Database[Doc], docs: list[Doc]) -> set[int]:
    """Insert new reminders (unordered); the positions of those refused (their id was taken)."""
    return dbm.insert_refused(database[dbm.REMINDERS], docs)


def get_many(database: Database[Doc], reminder_ids: Collection[str]) -> dict[str, Doc]:
    """Those of these reminders that exist, by id."""
    flt = {"_id": {"$in": sorted(reminder_ids)}}
    return {str(d["_id"]): d for d in database[dbm.REMINDERS].find(flt)}
