"""The planner service: turn reminders into pending messages and arm them on the broker.

A pass plans the window ``[plannedUntil, now + horizon)`` (from ``now`` when nothing is planned
yet, and at most ``MAX_CATCH_UP`` back after an outage) for every active reminder, inserts the
messages (duplicates refused by their deterministic ``_id``), arms wake-ups, then moves the
watermark. Order matters for crash safety: the window is marked ``inProgress`` before
any insert, so a pass that dies between writing and arming is re-armed by the next pass from
the database. Arming twice is harmless: consumers take each message through the send guard.

A reminder, user or token the document rules refuse (``shared.domain.validation``) is skipped
and reported (``PassReport.skipped``, a log line and ``tzpush_bad_documents_total``): the pass
plans everything else, moves the watermark and runs the janitor as usual.
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
from creator.rearm import Rearmed, rearm
from shared import metrics
from shared.broker import StompClient
from shared.clock import Clock, utcnow
from shared.domain.messages import Doc, Status
from shared.domain.plan import BadDocument, group_wakeups, plan_checked
from shared.settings import Settings
from shared.store import db as dbm
from shared.wire import SIGNATURE_HEADER, WakeUp, sign

log = logging.getLogger(__name__)

STATE_ID = "planner"
INSERT_CHUNK = 5000
SCAN_THRESHOLD = 300  # above this many ids, one scan beats $in lookups (docs/architecture.md)
# How far back a pass re-creates occurrences that no pass planned (creator down).
MAX_CATCH_UP = dt.timedelta(days=2)
# Bad documents logged one by one per pass; the rest are counted in one line (and the metric).
LOG_BAD_DOCUMENTS = 100


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
    skipped: list[BadDocument] = field(default_factory=list)  # bad documents, each once

    def summary(self) -> str:
        bad = (
            f"; {len(self.skipped)} bad documents skipped (logged; `tzpush doctor` lists them)"
            if self.skipped
            else ""
        )
        if self.window_start is None:
            return "nothing to plan (window already planned); " + f"{self.missed} marked is_missed"
        return (
            f"planned {self.window_start:%Y-%m-%d %H:%M:%S}Z .. "
            f"{self.window_end:%Y-%m-%d %H:%M:%S}Z: "
            f"{self.reminders} reminders -> {self.planned} occurrences x tokens, "
            f"{self.inserted} new, {self.existing} already there, {self.conflicts} conflicts; "
            f"{self.wakeups} wake-ups armed, {self.rearmed} re-armed; "
            f"{self.missed} marked is_missed; {self.seconds:.2f} s{bad}"
        )


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
        """Publish wake-ups for every pending message due in ``[start, end)`` (creator.rearm)."""
        return rearm(self, start, end, progress=progress, take_over_stopped=take_over_stopped)

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
        key = self.settings.stomp.signing_key
        for w in wakeups:
            now_ms = int(self.clock().timestamp() * 1000)
            delay = max(0, w.first_due_ms - lead_ms - now_ms)
            body = w.encode()
            # Signed, so a consumer can tell a wake-up of ours from one sent by whoever else
            # reaches the broker (shared/wire.py).
            signed = {SIGNATURE_HEADER: sign(body, key.get_secret_value())} if key else None
            queue = self.settings.queue(w.category)
            self.broker.send(queue, body, delay_ms=delay, headers=signed)
            if progress is not None:
                progress(len(w.items))
        return wakeups

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
        # Only ``plan_checked`` looks inside a reminder: here a missing or odd userId or
        # category must not raise (the reminder is reported as bad when its category is planned).
        user_ids = {u for r in reminders if isinstance(u := r.get("userId"), str)}
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
            category = r.get("category")
            by_category[category if isinstance(category, str) else ""].append(r)
        categories = self.settings.categories

        def chunks() -> Iterator[list[Doc]]:
            # One category at a time, in category order, each sorted by due instant: the same
            # order as one global sort, so each chunk's wake-ups are full ones. Planned lazily,
            # and cut into full chunks across categories: a category's tail goes in one insert
            # with the next one's head, so the next category is planned while a full chunk is
            # being inserted (with a chunk per tail, the database sat idle for each category's
            # planning: about a second each at 100k reminders).
            carry: list[Doc] = []
            for category in sorted(by_category):
                docs, skipped = plan_checked(
                    by_category[category],
                    users,
                    tokens_by_user,
                    start,
                    end,
                    now,
                    categories=categories,
                )
                self._report_bad(skipped, report)
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

    def _report_bad(self, skipped: list[BadDocument], report: PassReport) -> None:
        """Add what a category skipped to the pass's report: each document once per pass (a user
        with reminders in two categories is one bad user), a log line each, and the metric."""
        seen = {(b.kind, b.id) for b in report.skipped}
        for bad in skipped:
            if (bad.kind, bad.id) in seen:
                continue
            seen.add((bad.kind, bad.id))
            report.skipped.append(bad)
            if len(report.skipped) <= LOG_BAD_DOCUMENTS:
                metrics.bad_document(log, "planner", bad)
            else:
                metrics.BAD_DOCUMENTS.labels("planner", bad.kind).inc()
                if len(report.skipped) == LOG_BAD_DOCUMENTS + 1:
                    log.warning(
                        "planner: more than %d bad documents in this pass; the rest are only "
                        "counted (tzpush_bad_documents_total) and listed by `tzpush doctor`",
                        LOG_BAD_DOCUMENTS,
                    )

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
