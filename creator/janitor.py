"""The janitor: end what nobody will send, honestly.

A pending message whose grace window (plus a margin) has passed will never be sent by a consumer
(a consumer marks late messages ``is_missed`` itself; this catches the ones no consumer saw: the
broker lost its store, every consumer was down, a consumer died holding them). The janitor takes
the send guard first, so it never races a late consumer; when a dead consumer holds the guard,
its attempt record tells whether the pushes may have left (``failed``, outcome unknown) or not
(``is_missed``).

Whose clock: the database server's. The janitor is called with the planner's clock, and a
creator whose clock runs 7 minutes ahead would end messages 7 minutes before a consumer may still
send them. So it acts as of the earlier of the caller's clock and the database server's
(``hello``'s ``localTime``): it never ends a message before its due instant plus grace (plus
margin) by the database's clock, and it stamps and measures what it ends by that time too. A
server that does not say its time costs patience, not correctness: the janitor then acts as of
``UNKNOWN_SKEW`` earlier than the caller's clock, and logs it.

It also settles replay runs that stopped without settling (``shared.store.replays``): a replay
killed hard leaves messages ``replaying`` until its lease runs out; the janitor then ends them
by the attempt-record rule. Nothing indexes ``replaying`` (replays are rare), so this read is
done at most every ``REPLAY_CHECK_S`` per process, not every pass.

A pending message whose fields cannot be used (no category, a ``plannedAt`` that is not a date:
``shared.domain.validation.message_problem``) no consumer can send either: the janitor waits
the longest grace of any category (plus margin), then ends it ``failed`` with the problem as
its reason, and reports it (a log line, ``tzpush_bad_documents_total``). It never stops the
sweep of the others.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time

from shared import metrics
from shared.domain.messages import Doc, Status, outcome_unknown, past_grace
from shared.domain.validation import BadDocument, message_problem
from shared.settings import Settings
from shared.store.abc import Ending
from shared.store.abc_planning import PendingStore
from shared.store.journal import merge_journal

log = logging.getLogger(__name__)

JANITOR = "janitor"
# Older pending messages than this are not looked at (a deployment down for longer needs
# `tzpush stats` and an operator, not a silent sweep).
LOOKBACK = dt.timedelta(days=7)
# How much earlier than the caller's clock to act when the database does not say its time.
UNKNOWN_SKEW = dt.timedelta(minutes=15)
# Log the skew between the caller's clock and the database's above this.
WARN_SKEW_S = 5.0
# Look for replay runs that stopped (a read of the collection) at most this often per process.
REPLAY_CHECK_S = 600.0
_replays_checked: dict[str, float] = {}  # the stores' name -> monotonic time of the last look
_replays_lock = threading.Lock()


def database_now(pending: PendingStore, now: dt.datetime) -> dt.datetime:
    """The instant the janitor acts as of: ``now`` (the caller's clock), but never later than
    the database server's clock."""
    server = pending.server_now()
    if server is None:
        log.warning(
            "janitor: the database server does not report its time; acting as of %s before "
            "this host's clock, so a host clock that far ahead ends nothing early",
            UNKNOWN_SKEW,
        )
        return now - UNKNOWN_SKEW
    skew_s = (now - server).total_seconds()
    if abs(skew_s) > WARN_SKEW_S:
        log.warning(
            "janitor: the caller's clock is %+.1f s from the database server's; going by the "
            "earlier of the two",
            skew_s,
        )
    return min(now, server)


def _settle_replays(pending: PendingStore, now: dt.datetime) -> int:
    """Settle replay runs whose lease ran out; at most every ``REPLAY_CHECK_S`` per process
    and database."""
    with _replays_lock:
        last = _replays_checked.get(pending.name)
        if last is not None and time.monotonic() - last < REPLAY_CHECK_S:
            return 0
        _replays_checked[pending.name] = time.monotonic()
    return pending.settle_stale_replays(now, JANITOR)


def sweep(pending: PendingStore, settings: Settings, now: dt.datetime) -> int:
    """Mark overdue pending messages terminal; return how many.

    ``now`` is the caller's clock; the janitor acts as of the earlier of it and the database
    server's clock (``database_now``), so a caller whose clock runs ahead ends nothing early.
    """
    now = database_now(pending, now)
    _settle_replays(pending, now)
    consumer = pending.consumer
    # Outcomes a stopped consumer journaled and never merged are the truth: merge them first.
    merge_journal(
        consumer,
        receipts_delay_s=settings.outcomes.receipts_delay_s,
        max_failures=settings.outcomes.max_token_failures,
        older_than_s=60.0,
        clock=lambda: now,
    )
    graces = {c: cs.grace_seconds for c, cs in settings.categories.items()}
    longest = max(graces.values(), default=0)
    margin_s = settings.creator.janitor_margin_seconds
    margin = dt.timedelta(seconds=margin_s)
    now_ms = int(now.timestamp() * 1000)
    oldest_grace = dt.timedelta(seconds=min(graces.values(), default=0))
    # A lower bound keeps the index range bounded (an open range scanned the index).
    cursor = pending.due_fields(
        now - LOOKBACK,
        now - oldest_grace - margin,
        ("category", "scheduledAt", "plannedAt"),
    )
    problems: dict[str, str] = {}  # id -> what is wrong with the document
    overdue: list[Doc] = []
    for d in cursor:
        problem = message_problem(d)
        if problem is None:
            grace = graces.get(d["category"], 0)
        elif isinstance(d.get("_id"), str):
            grace = longest  # a consumer configured otherwise might still send it: patience
        else:
            continue  # an _id that no guard can name: left to `tzpush doctor`
        if past_grace(int(d["scheduledAt"].timestamp() * 1000), now_ms, grace, margin_s):
            overdue.append(d)
            if problem is not None:
                problems[d["_id"]] = problem
    if not overdue:
        return 0
    ids = [d["_id"] for d in overdue]
    ours = consumer.guards.take(ids, JANITOR, now)
    ends: list[Ending] = []
    for d in overdue:
        late = int((now - d["scheduledAt"]).total_seconds())
        problem = problems.get(d["_id"])
        grace = longest if problem else graces.get(d["category"], 0)
        planned = d.get("plannedAt")
        planned_late = isinstance(planned, dt.datetime) and planned > d["scheduledAt"]
        if d["_id"] in ours and problem:
            metrics.bad_document(log, JANITOR, BadDocument("message", d["_id"], problem))
            status, reason = Status.FAILED, f"bad document: {problem}; ended by the janitor"
        elif d["_id"] in ours and planned_late:
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
            guard = consumer.guards.holder(d["_id"])
            owner = None if guard is None else guard.owner
            if consumer.guards.in_attempt(owner, d["_id"]):
                status, reason = Status.FAILED, outcome_unknown(owner)
            else:
                status, reason = (
                    Status.IS_MISSED,
                    (
                        f"consumer {owner} took it and stopped before sending; "
                        f"{late} s past due, grace {grace} s"
                    ),
                )
        ends.append(Ending(d["_id"], status, reason, now, fields={"lateness_ms": late * 1000}))
    ended = pending.end(ends)
    log.info("janitor: %d overdue messages ended", ended)
    return ended
