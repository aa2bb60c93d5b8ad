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

from pymongo import UpdateOne
from pymongo.database import Database

from shared.domain.messages import Doc, Status, outcome_unknown, past_grace
from shared.settings import Settings
from shared.store import db as dbm
from shared.store import guards
from shared.store.journal import merge_journal
from shared.store.messages import end

log = logging.getLogger(__name__)

JANITOR = "janitor"
# Older pending messages than this are not looked at (a deployment down for longer needs
# `tzpush stats` and an operator, not a silent sweep).
LOOKBACK = dt.timedelta(days=7)


def sweep(database: Database[Doc], settings: Settings, now: dt.datetime) -> int:
    """Mark overdue pending messages terminal (as of ``now``); return how many."""
    # Outcomes a stopped consumer journaled and never merged are the truth: merge them first.
    merge_journal(
        database,
        receipts_delay_s=settings.consumer.receipts_delay_s,
        max_failures=settings.consumer.max_token_failures,
        older_than_s=60.0,
        clock=lambda: now,
    )
    graces = {c: cs.grace_seconds for c, cs in settings.categories.items()}
    margin_s = settings.creator.janitor_margin_seconds
    margin = dt.timedelta(seconds=margin_s)
    now_ms = int(now.timestamp() * 1000)
    oldest_grace = dt.timedelta(seconds=min(graces.values(), default=0))
    cursor = database[dbm.MESSAGES].find(
        {
            "status": Status.PENDING.value,
            "isDeleted": False,
            # A lower bound keeps the index range bounded (an open range scanned the index).
            "scheduledAt": {"$gte": now - LOOKBACK, "$lt": now - oldest_grace - margin},
        },
        {"category": 1, "scheduledAt": 1, "plannedAt": 1},
    )
    overdue = [
        d
        for d in cursor
        if past_grace(
            int(d["scheduledAt"].timestamp() * 1000),
            now_ms,
            graces.get(d["category"], 0),
            margin_s,
        )
    ]
    if not overdue:
        return 0
    ids = [d["_id"] for d in overdue]
    ours = guards.take_guards(database, ids, JANITOR, now)
    ops: list[UpdateOne] = []
    for d in overdue:
        late = int((now - d["scheduledAt"]).total_seconds())
        grace = graces.get(d["category"], 0)
        planned_late = d.get("plannedAt") is not None and d["plannedAt"] > d["scheduledAt"]
        if d["_id"] in ours and planned_late:
            status, reason = (
                Status.IS_MISSED,
                f"planned {int((d['plannedAt'] - d['scheduledAt']).total_seconds())} s after its "
                f"due instant (no planning pass ran in time: creator down); grace {grace} s",
            )
        elif d["_id"] in ours:
            status, reason = (
                Status.IS_MISSED,
                (
                    f"no consumer took it: {late} s past due, grace {grace} s "
                    "(consumers down or the broker lost the wake-up)"
                ),
            )
        else:
            guard = guards.holder(database, d["_id"]) or {}
            if guards.in_attempt(database, guard.get("owner"), d["_id"]):
                status, reason = Status.FAILED, outcome_unknown(guard.get("owner"))
            else:
                status, reason = (
                    Status.IS_MISSED,
                    (
                        f"consumer {guard.get('owner')} took it and stopped before sending; "
                        f"{late} s past due, grace {grace} s"
                    ),
                )
        ops.append(end(d["_id"], status, reason, now, lateness_ms=late * 1000))
    res = database[dbm.MESSAGES].bulk_write(ops, ordered=False)
    log.info("janitor: %d overdue messages ended", res.modified_count)
    return res.modified_count
