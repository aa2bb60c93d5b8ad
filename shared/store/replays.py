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

The reads and writes are the stores' (``shared.store.abc_replays.ReplayStores``: the replay
store, and the consumer's guards for attempt records); what is here is the rule over them.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import Any

from shared.domain.messages import Doc, Status, terminal_update
from shared.domain.replay import LEASE, settle_one
from shared.store import db as dbm
from shared.store.abc_replays import HeldWrite, ReplayStore, ReplayStores, Settled

log = logging.getLogger(__name__)


class ReplayFenced(Exception):
    """The run no longer holds a message it was about to send: someone settled it."""


def new_run(by: str) -> str:
    """A fresh run id: it names the run's attempt records and its hold on messages."""
    return f"replay:{by}:{uuid.uuid4().hex[:12]}"


def take(
    store: ReplayStore,
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
    return store.take(doc["_id"], origin, also or {}, record)


def hand_over(
    store: ReplayStore, run: str, ids: list[str], holder: str, now: dt.datetime
) -> list[Doc]:
    """Move ``run``'s hold of ``ids`` to ``holder`` (a consumer about to send them), its lease
    renewed; returns the messages ``holder`` now holds. Those no longer held by ``run`` (sent by
    another copy of the wake-up, or settled since) stay as they are. ``replay.sender`` names the
    holder for good: the attempt records ``holder`` writes carry that name, so whoever settles
    it after a crash finds them (``settle``)."""
    with dbm.translate_errors("taking over a replay's messages"):
        return store.hand_over(run, ids, holder, now + LEASE)


def leaving(stores: ReplayStores, run: str, ids: list[str], now: dt.datetime) -> None:
    """Record that ``ids`` may leave from now on, then check ``run`` still holds every one.

    Called just before each Expo request. Raises ``ReplayFenced`` (the request must not go)
    when a settler took any of them meanwhile; the record written is then harmless (the settler
    read it, or reads it, and ends those messages "outcome unknown" at worst).
    """
    with dbm.translate_errors("recording a replay attempt"):
        stores.consumer.guards.record_attempt(f"{run}:{uuid.uuid4().hex[:16]}", run, now, ids)
        held = stores.replays.holds(run, ids)
    if held < len(set(ids)):
        raise ReplayFenced(
            f"replay {run} no longer holds {len(set(ids)) - held} of the {len(ids)} messages "
            "it was about to send (settled by another replay or the janitor): stopping"
        )


def forget_attempts(store: ReplayStore, run: str) -> None:
    """Drop ``run``'s attempt records once every outcome of its requests is recorded."""
    with dbm.translate_errors("dropping replay attempt records"):
        store.forget_attempts(run)


def ended(
    message_id: str, holder: str, status: Status, reason: str, now: dt.datetime, **fields: Any
) -> HeldWrite:
    """End a held message (the terminal write of ``shared.store.messages.end``, held)."""
    return HeldWrite(message_id, holder, terminal_update(status, reason, now, **fields))


def back_to_missed(
    message_id: str,
    holder: str,
    why: str,
    now: dt.datetime,
    status: Status = Status.IS_MISSED,
) -> HeldWrite:
    """Give a held message back to the status it was taken from (``status``: ``is_missed``,
    or ``failed``; its reason, and a failure's code, kept), with why it was not sent. The next
    replay can take it."""
    return HeldWrite(
        message_id,
        holder,
        {
            "status": status.value,
            "replay.holder": None,
            "replay.leftMissed": why,
            "replay.leftAt": now,
        },
        unset=("replay.leaseUntil",),
    )


def settle(stores: ReplayStores, holder: str | None, settler: str, now: dt.datetime) -> Settled:
    """Settle every message ``holder`` holds (``None``: messages taken by a replay from before
    attempt records, which say nothing): fence, then decide from the attempt records."""
    fence = f"{settler}:{uuid.uuid4().hex[:8]}"
    # The old replay kept no lease: give it as long as a lease.
    taken_before = now - LEASE if holder is None else None
    out = Settled()
    with dbm.translate_errors("settling a stopped replay"):
        docs = stores.replays.fence(holder, fence, taken_before)
        if not docs:
            return out
        # Attempt records are named by the run, or by the consumer that sent for it.
        runs = {(d.get("replay") or {}).get(k) for d in docs for k in ("run", "sender")}
        guards = stores.consumer.guards
        maybe_left = {i for r in runs if r is not None for i in guards.maybe_sent(r)}
        writes: list[HeldWrite] = []
        for d in docs:
            s = settle_one(d.get("replay") or {}, d["_id"] in maybe_left, now)
            if s.unknown:
                writes.append(ended(d["_id"], fence, s.status, s.reason, now))
                out.unknown.append(d["_id"])
            else:
                writes.append(back_to_missed(d["_id"], fence, s.reason, now, s.status))
                out.missed.append(d["_id"])
        stores.replays.write(writes)
    log.warning("settled a stopped replay (%s): %s", holder, out.describe())
    return out


def stale_holders(store: ReplayStore, now: dt.datetime) -> set[str | None]:
    """Holders of ``replaying`` messages whose lease ran out (``None``: the old replay's).

    Read through the partial index ``replaying`` (only messages in that status are in it):
    callers do it at the start of a replay, and the janitor at most every few minutes.
    """
    out: set[str | None] = set()
    with dbm.translate_errors("looking for stopped replays"):
        for d in store.replaying():
            rec = d.get("replay") or {}
            lease = rec.get("leaseUntil")
            if rec.get("holder") is None or not isinstance(lease, dt.datetime) or lease < now:
                out.add(rec.get("holder"))
    return out


def settle_stale(stores: ReplayStores, now: dt.datetime, settler: str) -> Settled:
    """Settle every replay run whose lease ran out by ``now`` (killed hard, or far too slow)."""
    out = Settled()
    for holder in stale_holders(stores.replays, now):
        out += settle(stores, holder, settler, now)
    return out


__all__ = [
    "LEASE",
    "HeldWrite",
    "ReplayFenced",
    "Settled",
    "back_to_missed",
    "ended",
    "forget_attempts",
    "hand_over",
    "leaving",
    "new_run",
    "settle",
    "settle_stale",
    "stale_holders",
    "take",
]
