"""Pending messages by due instant, the guards on them, and their ends: what a re-arm reads
(``creator/rearm.py``), what the janitor reads and ends (``creator/janitor.py``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

from pymongo import UpdateOne
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


def pending_fields(
    database: Database[Doc], start: dt.datetime, end: dt.datetime, fields: Sequence[str]
) -> Cursor[Doc]:
    """A cursor over the pending messages due in ``[start, end)``, these fields (and ``_id``)
    only, in no particular order; the caller closes it or reads it to the end."""
    return database[dbm.MESSAGES].find(_pending(start, end), dict.fromkeys(fields, 1))


def count_pending_due(database: Database[Doc], start: dt.datetime, end: dt.datetime) -> int:
    """How many pending messages are due in ``[start, end)``."""
    return database[dbm.MESSAGES].count_documents(_pending(start, end))


def guards_on(database: Database[Doc], ids: Collection[str]) -> list[Doc]:
    """The send guards held on these message ids: ``owner`` and ``at`` only."""
    flt = {"_id": {"$in": sorted(ids)}}
    return list(database[dbm.SENDS].find(flt, {"owner": 1, "at": 1}))


def end_messages(database: Database[Doc], ends: Sequence[UpdateOne]) -> int:
    """Apply terminal writes (``shared.store.messages.end``), unordered; returns how many
    messages they ended (a write whose expected status was gone ends nothing)."""
    if not ends:
        return 0
    return dbm.critical(database, dbm.MESSAGES).bulk_write(list(ends), ordered=False).modified_count
