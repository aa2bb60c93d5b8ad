"""Replay runs in the database: taking missed (or failed) messages, the crash record before each
request, and settling a run that stopped, so no message stays ``replaying`` and none is pushed
twice.

A replay run (``tzpush replay``) takes each message with a compare-and-set ``is_missed ->
replaying`` (or ``failed -> replaying``, for a failure of a cause ``tzpush replay --status failed``
may send again) that stamps ``replay.run`` (the run, for ever: its attempt records carry that
name), ``replay.holder`` (who may act on the message now), ``replay.leaseUntil`` (until when
nobody else may assume the run is dead) and ``replay.from`` (the status it was taken from, where
a message that was not sent goes back to).

A replay queued by the API or the console is sent by a consumer, which first takes the run's
hold over (``hand_over``: ``replay.holder`` and, for good, ``replay.sender`` become its own
name, only where the run still holds the message, so a second copy of the wake-up takes
nothing). Its attempt records carry that name; settling reads the run's and the sender's.

The rule is the consumer's (``consumer.attempts``, ``shared.store.guards``): before each Expo
request the run writes an attempt record naming the messages about to leave (``leaving``). A
message of a run that stopped is then either in an attempt record, and may have left, so it ends
``failed`` "outcome unknown" and is never sent again; or in none, so it certainly never left and
goes back to where it was taken from (``is_missed``, or ``failed`` with its reason and code) for
the next replay (``settle``).

Who settles: the run itself on any error it sees (database error, failed record, Ctrl-C,
SIGTERM); otherwise, once its lease has run out (a run killed hard), the next replay or the
janitor (``settle_stale``). A run slower than its lease may still be alive, so settling fences
first: it moves ``replay.holder`` to the settler, then reads the run's attempt records. The run,
for its part, writes its attempt record first, then checks that it still holds every message of
the request, and sends nothing if not (``ReplayFenced``). Whatever the interleaving, either the
settler sees the attempt (and ends the message "outcome unknown") or the run sees the fence (and
sends nothing): never both sending.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database

from shared.domain.messages import Doc, Status, terminal_update
from shared.domain.replay import LEASE, settle_one
from shared.store import db as dbm
from shared.store import guards

log = logging.getLogger(__name__)


class ReplayFenced(Exception):
    """The run no longer holds a message it was about to send: someone settled it."""


@dataclass
class Settled:
    """What settling a stopped run did: back to where they were taken from, ``is_missed`` or
    ``failed`` (``missed``: certainly never left), and ``failed`` "outcome unknown" (may have
    left)."""

    missed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def __iadd__(self, other: Settled) -> Settled:
        self.missed += other.missed
        self.unknown += other.unknown
        return self

    def __bool__(self) -> bool:
        return bool(self.missed or self.unknown)

    def describe(self) -> str:
        return (
            f"{len(self.missed)} back to is_missed or failed, as before (never sent), "
            f"{len(self.unknown)} failed (outcome unknown, may have been sent)"
        )


def new_run(by: str) -> str:
    """A fresh run id: it names the run's attempt records and its hold on messages."""
    return f"replay:{by}:{uuid.uuid4().hex[:12]}"


def take(
    database: Database[Doc],
    doc: Doc,
    run: str,
    by: str,
    reason: str,
    now: dt.datetime,
    *,
    origin: Status = Status.IS_MISSED,
    also: Doc | None = None,
) -> bool:
    """Take one message for ``run`` (a compare-and-set: a concurrent replay loses). ``origin``:
    the status it must still have (``is_missed``, or ``failed``); ``also``: what else must still
    hold (the cause of a failure), so a message that changed since it was selected is left."""
    record: Doc = {
        "run": run,
        "holder": run,
        "by": by,
        "at": now,
        "leaseUntil": now + LEASE,
        "reason": reason,
        "from": origin.value,
    }
    if origin is Status.IS_MISSED:
        record["missedReason"] = doc.get("reason")
    else:
        record["failedReason"] = doc.get("reason")
    res = database[dbm.MESSAGES].update_one(
        {"_id": doc["_id"], "status": origin.value, **(also or {})},
        {"$set": {"status": Status.REPLAYING.value, "replay": record}},
    )
    return res.modified_count == 1


def hand_over(
    database: Database[Doc], run: str, ids: list[str], holder: str, now: dt.datetime
) -> list[Doc]:
    """Move ``run``'s hold of ``ids`` to ``holder`` (a consumer about to send them), its lease
    renewed; returns the messages ``holder`` now holds. Those no longer held by ``run`` (sent by
    another copy of the wake-up, or settled since) stay as they are. ``replay.sender`` names the
    holder for good: the attempt records ``holder`` writes carry that name, so whoever settles
    it after a crash finds them (``settle``)."""
    with dbm.translate_errors("taking over a replay's messages"):
        database[dbm.MESSAGES].update_many(
            {"_id": {"$in": ids}, "status": Status.REPLAYING.value, "replay.holder": run},
            {
                "$set": {
                    "replay.holder": holder,
                    "replay.sender": holder,
                    "replay.leaseUntil": now + LEASE,
                }
            },
        )
        return list(
            database[dbm.MESSAGES].find(
                {"_id": {"$in": ids}, "status": Status.REPLAYING.value, "replay.holder": holder}
            )
        )


def leaving(database: Database[Doc], run: str, ids: list[str], now: dt.datetime) -> None:
    """Record that ``ids`` may leave from now on, then check ``run`` still holds every one.

    Called just before each Expo request. Raises ``ReplayFenced`` (the request must not go)
    when a settler took any of them meanwhile; the record written is then harmless (the settler
    read it, or reads it, and ends those messages "outcome unknown" at worst).
    """
    with dbm.translate_errors("recording a replay attempt"):
        database[dbm.ATTEMPTS].insert_one(
            {"_id": f"{run}:{uuid.uuid4().hex[:16]}", "consumer": run, "at": now, "ids": ids}
        )
        held = database[dbm.MESSAGES].count_documents(
            {"_id": {"$in": ids}, "status": Status.REPLAYING.value, "replay.holder": run}
        )
    if held < len(set(ids)):
        raise ReplayFenced(
            f"replay {run} no longer holds {len(set(ids)) - held} of the {len(ids)} messages "
            "it was about to send (settled by another replay or the janitor): stopping"
        )


def forget_attempts(database: Database[Doc], run: str) -> None:
    """Drop ``run``'s attempt records once every outcome of its requests is recorded."""
    with dbm.translate_errors("dropping replay attempt records"):
        database[dbm.ATTEMPTS].delete_many({"consumer": run})


def held(message_id: str, holder: str) -> Doc:
    """The filter of a write by ``holder`` on a message it holds."""
    return {"_id": message_id, "status": Status.REPLAYING.value, "replay.holder": holder}


def ended(
    message_id: str, holder: str, status: Status, reason: str, now: dt.datetime, **fields: Any
) -> UpdateOne:
    """End a held message (the terminal write of ``shared.store.messages.end``, held)."""
    return UpdateOne(
        held(message_id, holder), {"$set": terminal_update(status, reason, now, **fields)}
    )


def back_to_missed(
    message_id: str,
    holder: str,
    why: str,
    now: dt.datetime,
    status: Status = Status.IS_MISSED,
) -> UpdateOne:
    """Give a held message back to the status it was taken from (``status``: ``is_missed``,
    or ``failed``; its reason, and a failure's code, kept), with why it was not sent. The next
    replay can take it."""
    return UpdateOne(
        held(message_id, holder),
        {
            "$set": {
                "status": status.value,
                "replay.holder": None,
                "replay.leftMissed": why,
                "replay.leftAt": now,
            },
            "$unset": {"replay.leaseUntil": ""},
        },
    )


def settle(database: Database[Doc], holder: str | None, settler: str, now: dt.datetime) -> Settled:
    """Settle every message ``holder`` holds (``None``: messages taken by a replay from before
    attempt records, which say nothing): fence, then decide from the attempt records."""
    fence = f"{settler}:{uuid.uuid4().hex[:8]}"
    flt: Doc = {"status": Status.REPLAYING.value, "replay.holder": holder}
    if holder is None:  # the old replay kept no lease: give it as long as a lease
        flt["replay.at"] = {"$not": {"$gte": now - LEASE}}
    out = Settled()
    with dbm.translate_errors("settling a stopped replay"):
        database[dbm.MESSAGES].update_many(flt, {"$set": {"replay.holder": fence}})
        docs = list(
            database[dbm.MESSAGES].find(
                {"status": Status.REPLAYING.value, "replay.holder": fence},
                {"replay.run": 1, "replay.at": 1, "replay.from": 1, "replay.sender": 1},
            )
        )
        if not docs:
            return out
        # Attempt records are named by the run, or by the consumer that sent for it.
        runs = {(d.get("replay") or {}).get(k) for d in docs for k in ("run", "sender")}
        maybe_left = {i for r in runs if r is not None for i in guards.maybe_sent(database, r)}
        ops: list[UpdateOne] = []
        for d in docs:
            s = settle_one(d.get("replay") or {}, d["_id"] in maybe_left, now)
            if s.unknown:
                ops.append(ended(d["_id"], fence, s.status, s.reason, now))
                out.unknown.append(d["_id"])
            else:
                ops.append(back_to_missed(d["_id"], fence, s.reason, now, s.status))
                out.missed.append(d["_id"])
        database[dbm.MESSAGES].bulk_write(ops, ordered=False)
    log.warning("settled a stopped replay (%s): %s", holder, out.describe())
    return out


def stale_holders(database: Database[Doc], now: dt.datetime) -> set[str | None]:
    """Holders of ``replaying`` messages whose lease ran out (``None``: the old replay's).

    Served by the partial index ``replaying`` (only messages in that status are in it): callers
    do it at the start of a replay, and the janitor at most every few minutes.
    """
    out: set[str | None] = set()
    with dbm.translate_errors("looking for stopped replays"):
        cursor = database[dbm.MESSAGES].find(
            {"status": Status.REPLAYING.value}, {"replay.holder": 1, "replay.leaseUntil": 1}
        )
        for d in cursor:
            rec = d.get("replay") or {}
            lease = rec.get("leaseUntil")
            if rec.get("holder") is None or not isinstance(lease, dt.datetime) or lease < now:
                out.add(rec.get("holder"))
    return out


def settle_stale(database: Database[Doc], now: dt.datetime, settler: str) -> Settled:
    """Settle every replay run whose lease ran out by ``now`` (killed hard, or far too slow)."""
    out = Settled()
    for holder in stale_holders(database, now):
        out += settle(database, holder, settler, now)
    return out
