"""The operator's figures on MongoDB: what ``tzpush stats`` (and ``GET /v1/stats``, the
console's overview) reads, the console's upcoming and problems pages, and where a replay run's
messages stand. Read only, an operator's read now and then, no hot path; each function says
which index serves it (or that none does, and why that is fine)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Iterator
from typing import Any

import pymongo
from bson.codec_options import CodecOptions, DatetimeConversion
from pymongo.database import Database

from shared.domain.messages import Doc, Status
from shared.instants import EPOCH
from shared.store import db as dbm

FAR = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)


# -- stats ---------------------------------------------------------------------------------------
READ_BATCH = 5000  # documents per round trip (on MongoDB; the server here sends all at once)
READ_DEADLINE_S = 900.0  # the whole read: about 33 s a million messages here
STATS_FIELDS = {
    "_id": 0,
    **dict.fromkeys(
        ("status", "category", "reason", "lateness_ms", "scheduledAt", "isDeleted", "sentAt"), 1
    ),
}
# Dates the calendar cannot hold (written by hand) come back as DatetimeMS, not an error.
LENIENT: CodecOptions[Doc] = CodecOptions(
    tz_aware=True, tzinfo=dt.UTC, datetime_conversion=DatetimeConversion.DATETIME_AUTO
)


def read_for_stats(database: Database[Doc], each: Callable[[Doc], None]) -> tuple[int, int]:
    """Every message's figure fields (``STATS_FIELDS``), each handed to ``each`` as it is
    read; then the registrations counted: (active, inactive).

    One cursor over each collection, ``READ_BATCH`` documents a round trip, never an
    aggregation that must finish in one (as aggregations, 20.9 s in all at 200,000 messages on
    the server here, so at 1M each passed the driver's 30 s). The server here answers a whole
    read in its first round trip (about 6.5 s for 200,000 messages with these fields), so the
    reads run under a deadline of their own (``READ_DEADLINE_S``); on MongoDB the batches
    come as read. Dates out of the calendar's range are read leniently (``LENIENT``)."""
    active = inactive = 0
    with pymongo.timeout(READ_DEADLINE_S):
        coll = database[dbm.MESSAGES].with_options(codec_options=LENIENT)
        for d in coll.find({}, STATS_FIELDS).batch_size(READ_BATCH):
            each(d)
        regs = database[dbm.TOKENS].with_options(codec_options=LENIENT)
        for t in regs.find({}, {"isActive": 1}).batch_size(READ_BATCH):
            if t.get("isActive") is True:
                active += 1
            elif t.get("isActive") is False:
                inactive += 1
    return active, inactive


# -- the console's upcoming page ----------------------------------------------------------------
PENDING: Doc = {"status": Status.PENDING.value, "isDeleted": False}


def pending_due(
    database: Database[Doc], fields: Collection[str], start: dt.datetime, end: dt.datetime
) -> Iterator[Doc]:
    """The pending messages due in ``[start, end)`` with ``fields``, an hour's range of the
    pending index at a time: the server here answers a whole read in its first round trip,
    and a day of a million reminders read at once came near the driver's 30 s. (Plain MongoDB
    sends a cursor's batches as they are read: there the hours only add round trips.)"""
    projection = dict.fromkeys(fields, 1)
    lo = start
    while lo < end:
        hi = min(end, lo.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1))
        yield from database[dbm.MESSAGES].find(
            {**PENDING, "scheduledAt": {"$gte": lo, "$lt": hi}}, projection
        )
        lo = hi


def count_overdue(database: Database[Doc], now: dt.datetime) -> int:
    """How many pending messages are due before ``now`` (a range of the pending index)."""
    return database[dbm.MESSAGES].count_documents(
        {**PENDING, "scheduledAt": {"$gte": EPOCH, "$lt": now}}
    )


# -- the console's problems page ----------------------------------------------------------------
CAUSE_FIELDS = {"errorCode": 1, "receipt": 1}  # what says whether a replay takes a failure
PROBLEM_FIELDS = dict.fromkeys(
    (
        "userId",
        "category",
        "label",
        "status",
        "reason",
        "scheduledAt",
        "finishedAt",
        "errorCode",
        "receipt",
        "replay",
    ),
    1,
)


class ProblemReads:
    """The messages of one status (missed or failed; partial indexes by due instant serve
    both), optionally of one category and one user, due in ``[since, until)``."""

    def __init__(
        self,
        database: Database[Doc],
        status: str,
        *,
        category: str = "",
        user: str = "",
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> None:
        self.coll = database[dbm.MESSAGES]
        q: Doc = {"status": status, "scheduledAt": {"$gte": since or EPOCH, "$lt": until or FAR}}
        if category:
            q["category"] = category
        if user:
            q["userId"] = user
        self.query = q

    def reasons(self) -> list[tuple[Any, int]]:
        """(reason, how many), most first (ties in the server's order)."""
        rows = self.coll.aggregate(
            [
                {"$match": self.query},
                {"$group": {"_id": "$reason", "n": {"$sum": 1}}},
                {"$sort": {"n": -1}},
            ]
        )
        return [(r["_id"], r["n"]) for r in rows]

    def causes(self) -> list[Doc]:
        """Each message's ``errorCode`` and ``receipt``, for the caller to judge: the cause
        filter would be an ``$or``, for which the server here reads every message. (Plain
        MongoDB would read the status's index range and filter the fetched documents: the
        same read as this one.)"""
        return list(self.coll.find(self.query, CAUSE_FIELDS))

    def count(self) -> int:
        return self.coll.count_documents(self.query)

    def latest(self, limit: int) -> list[Doc]:
        """At most ``limit`` of them with the fields the page shows, latest due first (by id
        within an instant)."""
        cursor = self.coll.find(self.query, PROBLEM_FIELDS)
        return list(cursor.sort([("scheduledAt", -1), ("_id", 1)]).limit(limit))


def failure_causes(database: Database[Doc], message_id: str) -> Doc | None:
    """The failed message's ``errorCode`` and ``receipt``; ``None`` if it is not failed. Read
    by ``_id`` and judged by the caller: an ``_id`` beside an ``$or`` reads every message on
    the server here (plain MongoDB reads the one document by its ``_id`` either way)."""
    return database[dbm.MESSAGES].find_one(
        {"_id": message_id, "status": Status.FAILED.value}, CAUSE_FIELDS
    )


# -- a replay run's progress --------------------------------------------------------------------
RUN_FIELDS = dict.fromkeys(
    ("userId", "category", "label", "status", "reason", "scheduledAt", "replay"), 1
)


def run_messages(database: Database[Doc], run_id: str, ids: list[str] | None) -> list[Doc]:
    """The messages of replay run ``run_id``, by due instant then id: by their ``ids`` when
    known, else by the run id they carry (a scan: no index serves ``replay.run``; replays are
    rare)."""
    flt: Doc = {"_id": {"$in": ids}} if ids is not None else {"replay.run": run_id}
    cursor = database[dbm.MESSAGES].find(flt, RUN_FIELDS)
    return list(cursor.sort([("scheduledAt", 1), ("_id", 1)]))
