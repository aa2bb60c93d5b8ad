"""What the planner reads and writes in MongoDB: users, reminders and registrations to plan from,
the messages it inserts, and the reads of its repairs (``creator/repairs.py``).

Each read is one index range or one lookup. Two rules of the MongoDB-compatible server here
(SecantusDB) shape them; a production MongoDB picks indexes by cost and applies projections in
the server, so there both rules only cost nothing:
- it picks an index by the filter's first field, so the indexed field is written first;
- it applies projections in Python, a fifth to a third slower than returning documents whole,
  so the chunk reads of a pass return whole documents.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from pymongo.database import Database
from pymongo.errors import BulkWriteError

from shared.domain.messages import Doc, Status
from shared.domain.plan import BUCKETS
from shared.store import db as dbm

SCAN_THRESHOLD = 300  # above this many ids, one scan beats $in lookups (docs/architecture.md)
DUPLICATE_KEY = 11000


# -- what to plan from -------------------------------------------------------------------------
def reminders_per_bucket(database: Database[Doc]) -> float:
    """The estimated number of reminders in one bucket (0 for an empty collection)."""
    return database[dbm.REMINDERS].estimated_document_count() / BUCKETS


def read_buckets(
    database: Database[Doc], lo: int, hi: int
) -> tuple[list[Doc], dict[str, Doc], dict[str, list[Doc]]]:
    """The active reminders, the users (by id) and the active tokens (by user id) of the users
    in buckets ``[lo, hi)``: one index range each, whole documents."""
    rng = {"bucket": {"$gte": lo, "$lt": hi}}
    reminders = list(database[dbm.REMINDERS].find({**rng, "active": True, "isDeleted": False}))
    users = {d["_id"]: d for d in database[dbm.USERS].find(rng)}
    tokens_by_user: dict[str, list[Doc]] = defaultdict(list)
    for t in database[dbm.TOKENS].find({**rng, "isActive": True}):
        tokens_by_user[t["userId"]].append(t)
    return reminders, users, tokens_by_user


def active_reminders_of(database: Database[Doc], user_ids: Sequence[str]) -> list[Doc]:
    """The active, not deleted reminders of these users."""
    flt: Doc = {"userId": {"$in": list(user_ids)}, "active": True, "isDeleted": False}
    return list(database[dbm.REMINDERS].find(flt))


def users_by_id(database: Database[Doc], ids: set[str]) -> dict[str, Doc]:
    """The users of these ids that exist, keyed by id."""
    return _load(database, dbm.USERS, "_id", ids)


def active_tokens_of(database: Database[Doc], user_ids: set[str]) -> dict[str, Doc]:
    """The active registrations of these users, keyed by their ``_id``."""
    return _load(database, dbm.TOKENS, "userId", user_ids, extra={"isActive": True})


def _load(
    database: Database[Doc],
    coll: str,
    key: str,
    ids: set[str],
    extra: dict[str, Any] | None = None,
) -> dict[str, Doc]:
    """Documents whose ``key`` is in ids, keyed by ``_id``: $in for few, one scan for many."""
    if len(ids) <= SCAN_THRESHOLD:
        # The indexed field first: ``{isActive, userId}`` scanned every token here (21 ms at
        # 1,100 tokens).
        flt: dict[str, Any] = {key: {"$in": sorted(ids)}, **(extra or {})}
        return {d["_id"]: d for d in database[coll].find(flt)}
    flt = dict(extra or {})
    return {d["_id"]: d for d in database[coll].find(flt) if d.get(key) in ids}


def reminder_versions(database: Database[Doc], ids: Sequence[str]) -> dict[str, Doc]:
    """Of these reminders, those that exist, keyed by id: ``version``, ``active``,
    ``isDeleted`` only."""
    flt = {"_id": {"$in": list(ids)}}
    return {
        r["_id"]: r
        for r in database[dbm.REMINDERS].find(flt, {"version": 1, "active": 1, "isDeleted": 1})
    }


# -- messages --------------------------------------------------------------------------------
def insert_messages(database: Database[Doc], docs: list[Doc], chunk: int) -> tuple[int, list[Doc]]:
    """Insert ``docs`` unordered, ``chunk`` at a time. Returns how many went in and the
    documents refused as duplicates (either index); any other write error is raised."""
    inserted = 0
    duplicates: list[Doc] = []
    for i in range(0, len(docs), chunk):
        part = docs[i : i + chunk]
        try:
            res = database[dbm.MESSAGES].insert_many(part, ordered=False)
            inserted += len(res.inserted_ids)
        except BulkWriteError as exc:
            details = exc.details
            inserted += details.get("nInserted", 0)
            for err in details.get("writeErrors", []):
                if err.get("code") != DUPLICATE_KEY:
                    raise
                duplicates.append(part[err["index"]])
    return inserted, duplicates


def existing_ids(database: Database[Doc], ids: Collection[str]) -> set[str]:
    """Which of these message ids exist."""
    flt = {"_id": {"$in": sorted(ids)}}
    return {d["_id"] for d in database[dbm.MESSAGES].find(flt, {"_id": 1})}


def planned_in_window(
    database: Database[Doc],
    user_ids: Sequence[str],
    window: tuple[dt.datetime, dt.datetime],
    planned_before: dt.datetime,
) -> list[Doc]:
    """The messages of these users due in ``window`` and planned at or before
    ``planned_before``, whatever their status: ``userId`` and ``notificationTokenId`` only."""
    flt = {
        "userId": {"$in": list(user_ids)},
        "scheduledAt": {"$gte": window[0], "$lt": window[1]},
        "plannedAt": {"$lte": planned_before},
    }
    return list(database[dbm.MESSAGES].find(flt, {"userId": 1, "notificationTokenId": 1}))


def pending_for_tokens(
    database: Database[Doc],
    user_ids: Sequence[str],
    token_ids: Iterable[Any],
    window: tuple[dt.datetime, dt.datetime],
    planned_before: dt.datetime,
) -> list[Doc]:
    """The pending messages of these users for these registrations, due in ``window`` and
    planned at or before ``planned_before`` (``(userId, scheduledAt)``): ``notificationTokenId``
    only."""
    flt = {
        "userId": {"$in": list(user_ids)},
        "scheduledAt": {"$gte": window[0], "$lt": window[1]},
        "status": Status.PENDING.value,
        "isDeleted": False,
        "plannedAt": {"$lte": planned_before},
        "notificationTokenId": {"$in": list(token_ids)},
    }
    return list(database[dbm.MESSAGES].find(flt, {"notificationTokenId": 1}))


# -- registrations ---------------------------------------------------------------------------
def token_ids_of(database: Database[Doc], user_ids: Sequence[str]) -> set[Any]:
    """The ids of every registration of these users, active or not."""
    flt = {"userId": {"$in": list(user_ids)}}
    return {t["_id"] for t in database[dbm.TOKENS].find(flt, {"_id": 1})}


def inactive_tokens_of(database: Database[Doc], user_ids: Sequence[str]) -> dict[Any, Doc]:
    """The registrations of these users turned off, keyed by id: ``userId`` and
    ``deactivationReason`` only."""
    flt = {"userId": {"$in": list(user_ids)}, "isActive": False}
    proj = {"userId": 1, "deactivationReason": 1}
    return {t["_id"]: t for t in database[dbm.TOKENS].find(flt, proj)}
