"""What ``tzpush doctor`` reads of MongoDB: the documents each stage reads (to find the bad ones
it would skip), and the pushes that failed for a project-level Expo error."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterator

from pymongo.database import Database

from shared.domain.messages import Doc, Status
from shared.instants import EPOCH
from shared.store import db as dbm

# What each stage reads, by what the doctor calls it: the collection and the filter.
STAGE_READS: dict[str, tuple[str, Doc]] = {
    "active reminders": (dbm.REMINDERS, {"active": True, "isDeleted": False}),  # the planner
    "users": (dbm.USERS, {}),  # the planner
    "active tokens": (dbm.TOKENS, {"isActive": True}),  # the planner
    # Ranges on the indexes' keys, as the janitor and the poller ask (no full scan).
    "pending messages": (
        dbm.MESSAGES,
        {"status": Status.PENDING.value, "isDeleted": False, "scheduledAt": {"$gte": EPOCH}},
    ),
    "messages awaiting a receipt": (
        dbm.MESSAGES,
        {"receipt.state": "pending", "receipt.checkAfter": {"$gte": EPOCH}},
    ),
}


def as_stages_read(database: Database[Doc], what: str, limit: int) -> Iterator[Doc]:
    """At most ``limit`` of the documents a stage reads, ``what`` being one of
    ``STAGE_READS``; read as they are iterated (an error arrives there)."""
    coll, flt = STAGE_READS[what]
    yield from database[coll].find(flt).limit(limit)


def project_failures(
    database: Database[Doc], codes: Collection[str], after: dt.datetime, limit: int
) -> Iterator[Doc]:
    """At most ``limit`` failed messages whose ``errorCode`` is one of ``codes`` and that ended
    at or after ``after``, or whose receipt's error is and was checked then; with those four
    fields. No index serves the question: it reads the collection, which is fine for an
    operator's command. Read as they are iterated (an error arrives there)."""
    flt: Doc = {
        "status": Status.FAILED.value,
        "$or": [
            {"errorCode": {"$in": list(codes)}, "finishedAt": {"$gte": after}},
            {"receipt.error": {"$in": list(codes)}, "receipt.checkedAt": {"$gte": after}},
        ],
    }
    fields = {"errorCode": 1, "finishedAt": 1, "receipt.error": 1, "receipt.checkedAt": 1}
    yield from database[dbm.MESSAGES].find(flt, fields).limit(limit)
