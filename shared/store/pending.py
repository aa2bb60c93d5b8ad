"""Pending messages by due instant, and the guards on them: what a re-arm reads
(``creator/rearm.py``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from pymongo.cursor import Cursor
from pymongo.database import Database

from shared.domain.messages import Doc, Status
from shared.store import db as dbm


def _pending(start: dt.datetime, end: dt.datetime) -> Doc:
    return {
        "status": Status.PENDING.value,
        "isDeleted": False,
        "scheduledAt": {"$gte": start, "$lt": end},
    }


def pending_due(
    database: Database[Doc], start: dt.datetime, end: dt.datetime, batch: int
) -> Cursor[Doc]:
    """A cursor over the pending messages due in ``[start, end)``, in due order, fetched
    ``batch`` at a time; the caller closes it."""
    coll = database[dbm.MESSAGES]
    return coll.find(_pending(start, end)).sort("scheduledAt", 1).batch_size(batch)


def count_pending_due(database: Database[Doc], start: dt.datetime, end: dt.datetime) -> int:
    """How many pending messages are due in ``[start, end)``."""
    return database[dbm.MESSAGES].count_documents(_pending(start, end))


def guards_on(database: Database[Doc], ids: Collection[str]) -> list[Doc]:
    """The send guards held on these message ids: ``owner`` and ``at`` only."""
    flt = {"_id": {"$in": sorted(ids)}}
    return list(database[dbm.SENDS].find(flt, {"owner": 1, "at": 1}))
