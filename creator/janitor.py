"""The janitor: end what nobody will send, honestly.

A pending message whose grace window (plus a margin) has passed will never be sent by a consumer
(a consumer marks late messages ``is_missed`` itself; this catches the ones no consumer saw: the
broker lost its store, every consumer was down, a consumer died holding them). The janitor takes
the send guard first, so it never races a late consumer; when a dead consumer holds the guard,
its attempt record tells whether the pushes may have left (``failed``, outcome unknown) or not
(``is_missed``).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database
from pymongo.errors import BulkWriteError

from shared import db as dbm
from shared.settings import Settings

log = logging.getLogger(__name__)

Doc = dict[str, Any]
JANITOR = "janitor"
# Older pending messages than this are not looked at (a deployment down for longer needs
# `tzpush stats` and an operator, not a silent sweep).
LOOKBACK = dt.timedelta(days=7)


def outcome_unknown(owner: object) -> str:
    """Reason for a message whose Expo request may or may not have gone out."""
    return (
        f"outcome unknown: consumer {owner} stopped during the Expo request; "
        "not retried, to avoid a duplicate push"
    )


def maybe_sent(database: Database[Doc], owner: str) -> set[str]:
    """Messages a consumer had started an Expo request for and has no merged outcome of."""
    return {
        i for d in database[dbm.ATTEMPTS].find({"consumer": owner}, {"ids": 1}) for i in d["ids"]
    }


def take_guards(
    database: Database[Doc], ids: list[str], owner: str, now: dt.datetime, wakeup: str | None = None
) -> set[str]:
    """Insert send guards; return the ids this owner got (the others were already taken)."""
    if not ids:
        return set()
    docs = [{"_id": i, "owner": owner, "wakeup": wakeup, "at": now} for i in ids]
    try:
        database[dbm.SENDS].insert_many(docs, ordered=False)
        return set(ids)
    except BulkWriteError as exc:
        lost = set()
        for err in exc.details.get("writeErrors", []):
            if err.get("code") != 11000:
                raise
            lost.add(docs[err["index"]]["_id"])
        return set(ids) - lost


def sweep(database: Database[Doc], settings: Settings, now: dt.datetime) -> int:
    """Mark overdue pending messages terminal; return how many."""
    from consumer.recorder import merge_journal  # outcomes a stopped consumer left unmerged

    merge_journal(
        database,
        receipts_delay_s=settings.consumer.receipts_delay_s,
        max_failures=settings.consumer.max_token_failures,
        older_than_s=60.0,
    )
    graces = {c: cs.grace_seconds for c, cs in settings.categories.items()}
    margin = dt.timedelta(seconds=settings.creator.janitor_margin_seconds)
    oldest_grace = dt.timedelta(seconds=min(graces.values(), default=0))
    cursor = database[dbm.MESSAGES].find(
        {
            "status": "pending",
            "isDeleted": False,
            # A lower bound keeps the index range bounded (an open range scanned the index).
            "scheduledAt": {"$gte": now - LOOKBACK, "$lt": now - oldest_grace - margin},
        },
        {"category": 1, "scheduledAt": 1, "plannedAt": 1},
    )
    overdue = [
        d
        for d in cursor
        if d["scheduledAt"] + dt.timedelta(seconds=graces.get(d["category"], 0)) + margin < now
    ]
    if not overdue:
        return 0
    ids = [d["_id"] for d in overdue]
    ours = take_guards(database, ids, JANITOR, now)
    ops: list[UpdateOne] = []
    for d in overdue:
        late = int((now - d["scheduledAt"]).total_seconds())
        grace = graces.get(d["category"], 0)
        planned_late = d.get("plannedAt") is not None and d["plannedAt"] > d["scheduledAt"]
        if d["_id"] in ours and planned_late:
            status, reason = (
                "is_missed",
                f"planned {int((d['plannedAt'] - d['scheduledAt']).total_seconds())} s after its "
                f"due instant (no planning pass ran in time: creator down); grace {grace} s",
            )
        elif d["_id"] in ours:
            status, reason = (
                "is_missed",
                (
                    f"no consumer took it: {late} s past due, grace {grace} s "
                    "(consumers down or the broker lost the wake-up)"
                ),
            )
        else:
            guard = database[dbm.SENDS].find_one({"_id": d["_id"]}) or {}
            attempt = database[dbm.ATTEMPTS].find_one(
                {"consumer": guard.get("owner"), "ids": d["_id"]}, {"_id": 1}
            )
            if attempt is not None:
                status, reason = "failed", outcome_unknown(guard.get("owner"))
            else:
                status, reason = (
                    "is_missed",
                    (
                        f"consumer {guard.get('owner')} took it and stopped before sending; "
                        f"{late} s past due, grace {grace} s"
                    ),
                )
        ops.append(
            UpdateOne(
                {"_id": d["_id"], "status": "pending"},
                {
                    "$set": {
                        "status": status,
                        "reason": reason,
                        "finishedAt": now,
                        "lateness_ms": late * 1000,
                    }
                },
            )
        )
    res = database[dbm.MESSAGES].bulk_write(ops, ordered=False)
    log.info("janitor: %d overdue messages ended", res.modified_count)
    return res.modified_count
