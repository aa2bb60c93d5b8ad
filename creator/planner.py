"""The planner service: turn reminders into pending messages and arm them on the broker.

A pass plans the window ``[plannedUntil, now + horizon)`` (from ``now`` when nothing is planned
yet, and at most ``MAX_CATCH_UP`` back after an outage) for every active reminder, inserts the
messages (duplicates refused by their deterministic ``_id``), arms wake-ups, then moves the
watermark. Order matters for crash safety: the window is marked ``inProgress`` before
any insert, so a pass that dies between writing and arming is re-armed by the next pass from
the database. Arming twice is harmless: consumers take each message through the send guard.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pymongo.database import Database
from pymongo.errors import BulkWriteError

from creator.janitor import sweep
from shared.broker import StompClient
from shared.clock import Clock, utcnow
from shared.domain.messages import Doc, Status
from shared.domain.plan import WakeupStream, group_wakeups, plan_messages
from shared.settings import Settings
from shared.store import db as dbm
from shared.wire import WakeUp

log = logging.getLogger(__name__)

STATE_ID = "planner"
INSERT_CHUNK = 5000
SCAN_THRESHOLD = 300  # above this many ids, one scan beats $in lookups (docs/architecture.md)
# How far back a pass re-creates occurrences that no pass planned (creator down).
MAX_CATCH_UP = dt.timedelta(days=2)
# A re-arm reads and arms this many pending messages at a time: its memory is bounded by this,
# not by the number of pending messages.
REARM_CHUNK = 5000
# A consumer holds a guard from the lead time before a due instant until it sends; past this
# margin after both its guard and the due instant (plus lead and wake-up window), a guard on a
# message still pending is presumed left by a consumer that stopped (see Planner.rearm).
STOPPED_MARGIN_S = 60.0


@dataclass
class PassReport:
    """What a planning pass did (printed by ``tzpush creator --once``)."""

    window_start: dt.datetime | None = None
    window_end: dt.datetime | None = None
    reminders: int = 0
    planned: int = 0
    inserted: int = 0
    existing: int = 0
    conflicts: int = 0
    wakeups: int = 0
    rearmed: int = 0
    missed: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.window_start is None:
            return "nothing to plan (window already planned); " + f"{self.missed} marked is_missed"
        return (
            f"planned {self.window_start:%Y-%m-%d %H:%M:%S}Z .. "
            f"{self.window_end:%Y-%m-%d %H:%M:%S}Z: "
            f"{self.reminders} reminders -> {self.planned} occurrences x tokens, "
            f"{self.inserted} new, {self.existing} already there, {self.conflicts} conflicts; "
            f"{self.wakeups} wake-ups armed, {self.rearmed} re-armed; "
            f"{self.missed} marked is_missed; {self.seconds:.2f} s"
        )


@dataclass
class Rearmed:
    """What a re-arm did (printed by ``tzpush rebuild``)."""

    messages: int = 0
    wakeups: int = 0
    taken_over: int = 0  # guarded by a consumer presumed stopped: armed for a takeover
    held: int = 0  # guarded by a consumer that may still be running: left to it


class Planner:
    """Plans and arms. Takes its collaborators and its clock as arguments."""

    def __init__(
        self,
        database: Database[Doc],
        broker: StompClient | None,
        settings: Settings,
        clock: Clock = utcnow,
    ) -> None:
        self.db = database
        self.broker = broker
        self.settings = settings
        self.clock = clock
        self.on_armed: Callable[[int], None] | None = None

    # -- public ----------------------------------------------------------------------------
    def run_pass(self) -> PassReport:
        """One planning pass (idempotent), followed by the janitor."""

        t0 = time.perf_counter()
        report = PassReport()
        now = self.clock()
        st = self.db[dbm.STATE].find_one({"_id": STATE_ID}) or {}
        prog = st.get("inProgress")
        if prog and prog["to"] > now:
            report.rearmed = self.rearm(prog["from"], prog["to"]).messages
            report.notes.append("re-armed the window of an interrupted pass")
        # Resume from the watermark even when it is in the past (the creator was down longer
        # than the horizon): the missed occurrences are created too, so each one ends in a
        # terminal status (sent late within grace, or is_missed with the reason), never absent.
        start = max(st.get("plannedUntil") or now, now - MAX_CATCH_UP)
        if start < now:
            report.notes.append(
                f"catching up {int((now - start).total_seconds())} s planned by no pass "
                "(creator was down): late occurrences are sent within grace or marked is_missed"
            )
        c = self.settings.creator
        end = now + dt.timedelta(hours=c.horizon_hours)
        # Plan in slices: reading every reminder is the cost of a pass, so it is paid a few
        # times a day (when a slice of the horizon is unplanned), not every interval. Passes in
        # between read one document; management commands plan their changes at once.
        if end - start >= dt.timedelta(hours=min(c.slice_hours, c.horizon_hours / 2)):
            self.db[dbm.STATE].update_one(
                {"_id": STATE_ID},
                {"$set": {"inProgress": {"from": start, "to": end, "at": now}}},
                upsert=True,
            )
            reminders = list(self.db[dbm.REMINDERS].find({"active": True, "isDeleted": False}))
            self._plan_and_arm(reminders, start, end, now, report)
            self.db[dbm.STATE].update_one(
                {"_id": STATE_ID},
                {"$max": {"plannedUntil": end}, "$unset": {"inProgress": ""}},
            )
            report.window_start, report.window_end = start, end
        report.missed = sweep(self.db, self.settings, now)
        report.seconds = time.perf_counter() - t0
        return report

    def plan_users(self, user_ids: Sequence[str]) -> PassReport:
        """Plan these users' reminders for ``[now, plannedUntil)`` at once (after a change)."""
        report = PassReport()
        now = self.clock()
        st = self.db[dbm.STATE].find_one({"_id": STATE_ID}) or {}
        end = st.get("plannedUntil")
        if end is None or end <= now:
            return report  # nothing planned yet: the next pass covers these users
        reminders = list(
            self.db[dbm.REMINDERS].find(
                {"userId": {"$in": list(user_ids)}, "active": True, "isDeleted": False}
            )
        )
        self._plan_and_arm(reminders, now, end, now, report)
        report.window_start, report.window_end = now, end
        return report

    def rearm(
        self,
        start: dt.datetime,
        end: dt.datetime,
        *,
        progress: Callable[[int], object] | None = None,
        take_over_stopped: bool = False,
    ) -> Rearmed:
        """Publish wake-ups for every pending message due in ``[start, end)``, from the database.

        Streams: the pending messages are read with a cursor in due order and armed
        ``REARM_CHUNK`` at a time, each category's last wake-up carried into the next chunk
        while it can still grow (``WakeupStream``), so wake-ups stay full and memory is bounded
        by the chunk. ``progress`` gets the number of messages of each wake-up published.

        Each wake-up keeps the snapshot time of what it names (the oldest ``plannedAt``), not
        the time of the re-arm: the consumer rechecks every change made since the data was read.

        ``take_over_stopped`` (``tzpush rebuild``, after the broker lost its store, when no
        frame of a dead consumer will ever be redelivered): messages guarded by a consumer
        presumed stopped go in wake-ups marked ``takeover``, whose consumer takes those guards
        over as for a redelivered frame (the holder fenced, its journal merged, its attempt
        records ending what may have left ``failed``). Presumed stopped: both the guard and the
        due instant are older than lead + wake-up window + ``STOPPED_MARGIN_S``, by when a
        running consumer has sent the message or recorded the attempt. Anything else guarded is
        left to its holder, in ordinary wake-ups that skip it.
        """
        c = self.settings.creator
        flt = {
            "status": Status.PENDING.value,
            "isDeleted": False,
            "scheduledAt": {"$gte": start, "$lt": end},
        }
        chunk = REARM_CHUNK
        cursor = self.db[dbm.MESSAGES].find(flt).sort("scheduledAt", 1).batch_size(chunk)
        now = self.clock()
        kw: dict[str, Any] = {"size": c.wakeup_size, "window_s": c.wakeup_window_seconds}
        plain = WakeupStream(planned_at=now, **kw)
        taking = WakeupStream(planned_at=now, takeover=True, **kw)
        out = Rearmed()
        try:
            while docs := list(itertools.islice(cursor, chunk)):
                out.messages += len(docs)
                stopped: set[str] = set()
                if take_over_stopped:
                    stopped, held = self._held_by_stopped(docs)
                    out.taken_over += len(stopped)
                    out.held += held
                wakeups = plain.add([d for d in docs if d["_id"] not in stopped])
                wakeups += taking.add([d for d in docs if d["_id"] in stopped])
                out.wakeups += len(self._send_wakeups(wakeups, progress))
            out.wakeups += len(self._send_wakeups(plain.close() + taking.close(), progress))
        finally:
            cursor.close()
        if out.wakeups and self.broker is not None:
            self.broker.flush()
        if self.on_armed and out.wakeups:
            self.on_armed(out.wakeups)
        return out

    def arm(self, docs: Iterable[Doc], *, progress: Any = None) -> list[WakeUp]:
        """Group documents into wake-ups and schedule each ``lead`` before its first due instant.

        Returns once the broker has confirmed every wake-up (one receipt for all of them).
        """
        wakeups = self._publish(docs, progress=progress)
        if wakeups and self.broker is not None:
            self.broker.flush()
        return wakeups

    def _publish(self, docs: Iterable[Doc], *, progress: Any = None) -> list[WakeUp]:
        c = self.settings.creator
        wakeups = group_wakeups(
            docs, size=c.wakeup_size, window_s=c.wakeup_window_seconds, planned_at=self.clock()
        )
        self._send_wakeups(wakeups, progress)
        if wakeups and self.on_armed:
            self.on_armed(len(wakeups))
        return wakeups

    def _send_wakeups(
        self, wakeups: list[WakeUp], progress: Callable[[int], object] | None
    ) -> list[WakeUp]:
        """Schedule each wake-up ``lead`` before its first due instant (at once if that passed)."""
        if not wakeups:
            return wakeups
        if self.broker is None:
            raise RuntimeError("planner has no broker connection to arm wake-ups")
        if not self.broker.connected:  # e.g. dropped while idle between passes
            self.broker.connect()
        lead_ms = int(self.settings.creator.lead_seconds * 1000)
        for w in wakeups:
            now_ms = int(self.clock().timestamp() * 1000)
            delay = max(0, w.first_due_ms - lead_ms - now_ms)
            self.broker.send(self.settings.queue(w.category), w.encode(), delay_ms=delay)
            if progress is not None:
                progress(len(w.items))
        return wakeups

    def _held_by_stopped(self, docs: list[Doc]) -> tuple[set[str], int]:
        """Ids of ``docs`` guarded by a consumer presumed stopped, and how many others are held.

        Only messages a consumer can hold are looked up: due before now + lead + wake-up window
        (a wake-up fires ``lead`` before its first due instant and spans one window).
        """
        c = self.settings.creator
        now = self.clock()
        reach = dt.timedelta(seconds=c.lead_seconds + c.wakeup_window_seconds)
        stale = now - reach - dt.timedelta(seconds=STOPPED_MARGIN_S)
        due = {d["_id"]: d["scheduledAt"] for d in docs if d["scheduledAt"] < now + reach}
        if not due:
            return set(), 0
        stopped: set[str] = set()
        held = 0
        for g in self.db[dbm.SENDS].find({"_id": {"$in": sorted(due)}}, {"owner": 1, "at": 1}):
            at = g.get("at")
            if isinstance(at, dt.datetime) and at <= stale and due[g["_id"]] <= stale:
                stopped.add(g["_id"])
            else:
                held += 1
        return stopped, held

    # -- internals -------------------------------------------------------------------------
    def _plan_and_arm(
        self,
        reminders: list[Doc],
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
        report: PassReport,
    ) -> None:
        report.reminders += len(reminders)
        if not reminders:
            return
        user_ids = {r["userId"] for r in reminders}
        # Whole user and token documents (small): the MongoDB-compatible server here applies
        # projections in Python, a fifth to a third slower than returning documents as stored.
        # Users and tokens are read at once: while one reply is decoded here, the server works
        # on the other's (read one after the other, the server waited for each decode).
        with ThreadPoolExecutor(1, thread_name_prefix="plan-read") as pool:
            tokens = pool.submit(
                self._load, dbm.TOKENS, "userId", user_ids, extra={"isActive": True}
            )
            users = self._load(dbm.USERS, "_id", user_ids)
            tokens_by_user: dict[str, list[Doc]] = defaultdict(list)
            for t in tokens.result().values():
                tokens_by_user[t["userId"]].append(t)
        by_category: dict[str, list[Doc]] = defaultdict(list)
        for r in reminders:
            by_category[r["category"]].append(r)

        def chunks() -> Iterator[list[Doc]]:
            # One category at a time, in category order, each sorted by due instant: the same
            # order as one global sort, so each chunk's wake-ups are full ones. Planned lazily,
            # and cut into full chunks across categories: a category's tail goes in one insert
            # with the next one's head, so the next category is planned while a full chunk is
            # being inserted (with a chunk per tail, the database sat idle for each category's
            # planning: about a second each at 100k reminders).
            carry: list[Doc] = []
            for category in sorted(by_category):
                docs = plan_messages(by_category[category], users, tokens_by_user, start, end, now)
                report.planned += len(docs)
                docs.sort(key=lambda d: (d["scheduledAt"], d["_id"]))
                docs = carry + docs
                cut = len(docs) - len(docs) % INSERT_CHUNK
                for i in range(0, cut, INSERT_CHUNK):
                    yield docs[i : i + INSERT_CHUNK]
                carry = docs[cut:]
            if carry:
                yield carry

        # The next chunk is inserted while this one is armed (the database and the broker work
        # at once). A chunk is armed only after its own insert returned: a wake-up never names a
        # message that is not in the database yet.
        pending = chunks()
        first = next(pending, None)
        if first is None:
            return
        armed = 0
        with ThreadPoolExecutor(1, thread_name_prefix="plan-insert") as pool:
            fut = pool.submit(self._insert, first, report)
            for nxt in itertools.chain(pending, [None]):
                ready = fut.result()
                if nxt is not None:
                    fut = pool.submit(self._insert, nxt, report)
                armed += len(self._publish(ready))
        if armed and self.broker is not None:
            self.broker.flush()
        report.wakeups += armed

    def _load(
        self,
        coll: str,
        key: str,
        ids: set[str],
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Doc]:
        """Documents whose ``key`` is in ids, keyed by ``_id``: $in for few, one scan for many."""
        flt: dict[str, Any] = dict(extra or {})
        if len(ids) <= SCAN_THRESHOLD:
            flt[key] = {"$in": sorted(ids)}
            return {d["_id"]: d for d in self.db[coll].find(flt)}
        return {d["_id"]: d for d in self.db[coll].find(flt) if d.get(key) in ids}

    def _insert(self, docs: list[Doc], report: PassReport) -> list[Doc]:
        """Insert, ignoring duplicates; return what should be armed (new and already pending)."""
        duplicates: list[Doc] = []
        for i in range(0, len(docs), INSERT_CHUNK):
            chunk = docs[i : i + INSERT_CHUNK]
            try:
                res = self.db[dbm.MESSAGES].insert_many(chunk, ordered=False)
                report.inserted += len(res.inserted_ids)
            except BulkWriteError as exc:
                details = exc.details
                report.inserted += details.get("nInserted", 0)
                for err in details.get("writeErrors", []):
                    if err.get("code") != 11000:
                        raise
                    duplicates.append(chunk[err["index"]])
        if not duplicates:
            return docs
        # A duplicate is either this very occurrence (same _id: already planned, fine) or
        # another pending message holding the same user/token/category/label/instant (an
        # older version of the reminder, or a twin reminder): that one stands, ours is dropped.
        # Servers differ in which index they report, so look at what exists.
        existing = self._existing_ids(duplicates)
        conflicted = {d["_id"] for d in duplicates} - existing
        report.existing += len(duplicates) - len(conflicted)
        report.conflicts += len(conflicted)
        if conflicted:
            log.warning("%d planned messages collide with other pending ones", len(conflicted))
        return [d for d in docs if d["_id"] not in conflicted]

    def _existing_ids(self, docs: list[Doc]) -> set[str]:
        ids = {d["_id"] for d in docs}
        coll = self.db[dbm.MESSAGES]
        if len(ids) <= SCAN_THRESHOLD:
            return {d["_id"] for d in coll.find({"_id": {"$in": sorted(ids)}}, {"_id": 1})}
        # Many duplicates (a second creator on the same window): one index range beats lookups.
        # Handled messages are duplicates on _id only, so they exist by definition.
        lo = min(d["scheduledAt"] for d in docs)
        hi = max(d["scheduledAt"] for d in docs)
        pending = {
            d["_id"]
            for d in coll.find(
                {
                    "status": Status.PENDING.value,
                    "isDeleted": False,
                    "scheduledAt": {"$gte": lo, "$lte": hi},
                },
                {"_id": 1},
            )
        }
        rest = ids - pending
        if rest and len(rest) <= SCAN_THRESHOLD:
            pending |= {d["_id"] for d in coll.find({"_id": {"$in": sorted(rest)}}, {"_id": 1})}
        elif rest:
            pending |= {
                d["_id"]
                for d in coll.find({"status": {"$ne": Status.PENDING.value}}, {"_id": 1})
                if d["_id"] in rest
            }
        return ids & pending
