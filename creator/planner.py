"""The planner service: turn reminders into pending messages and arm them on the broker.

Users are split into partitions (``creator.partitions``, by a stable hash of the user id; see
``shared/store/partitions.py``). Each running creator holds a share of them under a lease in
MongoDB, and a pass plans only the partitions it holds. Per partition, a pass plans the window
``[plannedUntil, now + horizon)`` (from ``now`` when nothing is planned yet, and at most
``MAX_CATCH_UP`` back after an outage) for every active reminder, inserts the messages
(duplicates refused by their deterministic ``_id``), arms wake-ups, then moves the partition's
watermark. Order matters for crash safety: the window is marked ``inProgress`` on each
partition before any insert, so a pass that dies between writing and arming is planned again
from that window's start by whichever creator holds the partition next: what it inserted is
refused as a duplicate and armed as found. Arming twice is harmless: consumers take each
message through the send guard.

Memory does not grow with the number of reminders: a pass reads its partitions a chunk of
users at a time (a range of buckets: reminders, users and tokens by one index range each,
about ``CHUNK_REMINDERS`` reminders), inserts each chunk while a thread of its own reads and
plans the next (``_ahead``, a bounded queue: at most about two chunks are held at once),
spools what it inserted to local disk as sorted runs, and arms once every chunk is in, by
merging the runs in due order (``creator/spool.py``), so wake-ups are as full as if the whole
window had been planned at once.

A reminder, user or token the document rules refuse (``shared.domain.validation``) is skipped
and reported (``PassReport.skipped``, a log line and ``tzpush_bad_documents_total``): the pass
plans everything else, moves the watermark and runs the janitor as usual.

The janitor runs once per pass of the holder of partition ``JANITOR_PARTITION``, so once per
interval for the whole fleet, not once per creator.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pymongo.database import Database
from pymongo.errors import BulkWriteError

from creator.janitor import sweep
from creator.rearm import Rearmed, rearm
from creator.spool import ArmSpool
from shared import metrics
from shared.broker import StompClient
from shared.clock import Clock, utcnow
from shared.domain import intent
from shared.domain.messages import Doc, Status
from shared.domain.plan import (
    BUCKETS,
    MAX_CATCH_UP,
    BadDocument,
    bucket_of,
    group_sorted,
    group_wakeups,
    partition_buckets,
    partition_of,
    plan_checked,
)
from shared.errors import TransientError
from shared.settings import Settings
from shared.store import db as dbm
from shared.store import erasure
from shared.store import partitions as parts_store
from shared.store.intent import changed_users, erased_since
from shared.store.messages import end as end_message
from shared.store.partitions import Membership, backfill_buckets, ensure_partitions
from shared.wire import SIGNATURE_HEADER, WakeUp, sign

log = logging.getLogger(__name__)

# The single watermark of creators before partitions (in planner_state); partition documents
# are seeded from it once (shared/store/partitions.py).
STATE_ID = parts_store.LEGACY_ID
INSERT_CHUNK = 5000
# A planning chunk: a range of buckets holding about this many reminders (estimated from the
# collection's size). Peak memory follows it, not the number of reminders.
CHUNK_REMINDERS = 20_000
SCAN_THRESHOLD = 300  # above this many ids, one scan beats $in lookups (docs/architecture.md)
# Bad documents logged one by one per pass; the rest are counted in one line (and the metric).
LOG_BAD_DOCUMENTS = 100
# Its holder runs the janitor (once per pass for the fleet).
JANITOR_PARTITION = 0
WAKEUP_BATCH = 200  # wake-ups sent between two reads of the spool
# Planned pieces (of INSERT_CHUNK messages) queued ahead of their insert: about a chunk's worth
# when each reminder makes one message; at least one (a queue of 0 would be unbounded).
AHEAD_PIECES = max(1, CHUNK_REMINDERS // INSERT_CHUNK)
T = TypeVar("T")


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
    missed: int = 0
    seconds: float = 0.0
    partitions: list[int] = field(default_factory=list)  # held by this creator during the pass
    planned_partitions: list[int] = field(default_factory=list)  # planned in this pass
    spooled_bytes: int = 0
    notes: list[str] = field(default_factory=list)
    skipped: list[BadDocument] = field(default_factory=list)  # bad documents, each once
    # Users a planning of a few users looked up after its insert (``_drop_erased``): found
    # there (with the ``createdAt`` found: a user erased and created again is another), or
    # erased since it read them (``Manager.undo_if_erased``).
    alive: dict[str, Any] = field(default_factory=dict)
    erased: set[str] = field(default_factory=set)

    def summary(self) -> str:
        bad = (
            f"; {len(self.skipped)} bad documents skipped (logged; `tzpush doctor` lists them)"
            if self.skipped
            else ""
        )
        held = (
            f"partitions {_ranges(self.partitions)} held"
            if self.partitions
            else "no partition held"
        )
        if self.window_start is None:
            return (
                f"nothing to plan (window already planned; {held}); {self.missed} marked is_missed"
            )
        return (
            f"{held}, {_ranges(self.planned_partitions)} planned: "
            f"planned {self.window_start:%Y-%m-%d %H:%M:%S}Z .. "
            f"{self.window_end:%Y-%m-%d %H:%M:%S}Z: "
            f"{self.reminders} reminders -> {self.planned} occurrences x tokens, "
            f"{self.inserted} new, {self.existing} already there, {self.conflicts} conflicts; "
            f"{self.wakeups} wake-ups armed; "
            f"{self.missed} marked is_missed; {self.seconds:.2f} s{bad}"
        )


@dataclass
class Known:
    """Documents a caller holds, planned from without reading them back. Each map stands alone:
    a user in ``users`` is planned from that document; in ``tokens``, from those registrations
    (all of the user's active ones that the planning is for); in ``reminders``, from those
    reminders (all of the user's). A user missing from a map has that kind read.

    Users a call has just created are held whole (``creator.upserts``); a login holds the
    registration it has just written, and its user and reminders are read after that write
    (a zone or reminder change made meanwhile plans every registration it reads: the write
    before each read makes sure one of the two sees the other)."""

    users: dict[str, Doc] = field(default_factory=dict)
    tokens: dict[str, list[Doc]] = field(default_factory=dict)
    reminders: dict[str, list[Doc]] = field(default_factory=dict)


class Planner:
    """Plans and arms. Takes its collaborators and its clock as arguments.

    ``keep_leases``: the service keeps its partitions between passes (renewed by its heartbeat
    thread); a single pass (``tzpush creator --once``, tests, the bench) takes its share, plans
    it and gives it back, so the next pass or creator can take it at once.
    """

    def __init__(
        self,
        database: Database[Doc],
        broker: StompClient | None,
        settings: Settings,
        clock: Clock = utcnow,
        *,
        membership: Membership | None = None,
    ) -> None:
        self.db = database
        self.broker = broker
        self.settings = settings
        self.clock = clock
        self.on_armed: Callable[[int], None] | None = None
        c = settings.creator
        self.membership = membership or Membership(database, c.partitions, c.lease_seconds)
        self.keep_leases = False
        self.spool_dir: str | None = None  # where arming runs are spooled (None: TMPDIR)

    # -- public ----------------------------------------------------------------------------
    def run_pass(self) -> PassReport:
        """One planning pass over the partitions this creator holds, then (for the holder of
        partition ``JANITOR_PARTITION``) the janitor. Idempotent."""
        t0 = time.perf_counter()
        report = PassReport()
        now = self.clock()
        filled = backfill_buckets(self.db)
        if filled:
            report.notes.append(f"{filled} users, reminders or tokens given their bucket")
        try:
            held = self.membership.sync(now)
            report.partitions = sorted(held)
            if held:
                self._run_partitions(held, now, report)
            else:
                report.notes.append(
                    f"all {self.settings.creator.partitions} partitions are held by live "
                    f"creators ({len(self.membership.live) - 1} others)"
                )
        finally:
            if not self.keep_leases:
                self.membership.leave()
        report.seconds = time.perf_counter() - t0
        return report

    def _run_partitions(self, held: set[int], now: dt.datetime, report: PassReport) -> None:
        c = self.settings.creator
        docs = ensure_partitions(self.db, c.partitions)
        mine = {p: docs[p] for p in held}
        # An interrupted pass of these partitions (this creator's or a dead one's) is planned
        # again from its window's start: what it inserted is found by the inserts (the same
        # deterministic ids) and armed as found, the rest inserted. Not re-armed from the
        # messages: their index is by due instant, not by partition, so that read covered
        # every partition's messages of the window (at 1M past the driver's 30 s timeout).
        interrupted: dict[int, dt.datetime] = {}
        for p, d in mine.items():
            if prog := d.get("inProgress"):
                interrupted[p] = prog["from"]
        if interrupted:
            report.notes.append(
                f"planning again the window of an interrupted pass (partitions "
                f"{_ranges(interrupted)})"
            )
        # Resume from the watermark even when it is in the past (the creator was down longer
        # than the horizon): the missed occurrences are created too, so each one ends in a
        # terminal status (sent late within grace, or is_missed with the reason), never absent.
        end = now + dt.timedelta(hours=c.horizon_hours)
        # Plan in slices: reading every reminder is the cost of a pass, so it is paid a few
        # times a day (when a slice of the horizon is unplanned), not every interval. Passes in
        # between read one document per partition; management commands plan changes at once.
        slice_ = dt.timedelta(hours=min(c.slice_hours, c.horizon_hours / 2))
        by_start: dict[dt.datetime, list[int]] = defaultdict(list)
        for p, d in mine.items():
            mark = d.get("plannedUntil") or now
            if p in interrupted:
                mark = min(mark, interrupted[p])
            start = max(mark, now - MAX_CATCH_UP)
            if end - start >= slice_:
                by_start[start].append(p)
        for start, ps in sorted(by_start.items()):
            if start < now:
                report.notes.append(
                    f"catching up {int((now - start).total_seconds())} s planned by no pass "
                    "(creator was down): late occurrences are sent within grace or marked "
                    "is_missed"
                )
            self._plan_window(sorted(ps), start, end, now, report)
        if JANITOR_PARTITION in held:
            # As of now, not of the pass's start: a long pass (minutes at 1M reminders) would
            # leave what became overdue meanwhile for the next interval.
            report.missed = sweep(self.db, self.settings, self.clock())

    def plan_users(
        self,
        user_ids: Sequence[str],
        *,
        tokens: Collection[str] | None = None,
        reminders: Collection[str] | None = None,
        known: Known | None = None,
    ) -> PassReport:
        """Plan these users' reminders for ``[now, plannedUntil)`` at once (after a change),
        each up to the watermark of the user's partition, or to the end of its window in
        progress when that is later.

        ``tokens`` / ``reminders``: only these registrations / reminders (ids) are planned, for
        a change that adds nothing else (a login, a reminder): what the user's other devices
        and reminders already have is neither inserted again nor armed again. ``known``: users
        planned from the documents given, not read (``Known``)."""
        report = PassReport()
        now = self.clock()
        # Up to the end of a window in progress too (as a change cancels, ``Manager.supersede``):
        # a pass still running read the old version, and one that died left it unplanned (the
        # one ordering this does not cover: docs/architecture.md, crash safety).
        marks = parts_store.watermarks(
            self.db, user_ids, self.settings.creator.partitions, reach=True
        )
        by_end: dict[dt.datetime, list[str]] = defaultdict(list)
        for uid, end in marks.items():
            if end is not None and end > now:  # else nothing planned yet: the next pass does
                by_end[end].append(uid)
        only = set(reminders) if reminders is not None else None
        for end, uids in sorted(by_end.items()):
            held = [u for u in uids if known is not None and u in known.reminders]
            read = sorted(set(uids) - set(held))
            docs: list[Doc] = []
            if read:
                flt: Doc = {"userId": {"$in": read}, "active": True, "isDeleted": False}
                docs = list(self.db[dbm.REMINDERS].find(flt))
            if known is not None:
                docs += [
                    r
                    for u in held
                    for r in known.reminders.get(u, [])
                    if r.get("active", True) and not r.get("isDeleted")
                ]
            docs = [r for r in docs if only is None or r["_id"] in only]
            self._plan_and_arm(
                docs,
                now,
                end,
                now,
                report,
                tokens=set(tokens) if tokens is not None else None,
                known=known,
            )
            report.window_start = now
            report.window_end = max(end, report.window_end or end)
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
            docs,
            size=c.wakeup_size,
            window_s=self.settings.wakeup.window_seconds,
            planned_at=self.clock(),
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
        lead_ms = int(self.settings.wakeup.lead_seconds * 1000)
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

    # -- a window of some partitions, streamed -----------------------------------------------
    def _plan_window(
        self,
        ps: list[int],
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
        report: PassReport,
    ) -> None:
        """Plan ``[start, end)`` for the users of partitions ``ps``, a chunk at a time."""
        c = self.settings.creator
        me = self.membership.me
        pid = {p: parts_store.partition_id(p, c.partitions) for p in ps}
        with self.membership.hold(ps):
            ours = [p for p in ps if parts_store.begin(self.db, pid[p], me, start, end, now)]
            if not ours:
                return
            ranges = _merged(partition_buckets(p, c.partitions) for p in ours)
            since = parts_store.in_progress_since(self.db, [pid[p] for p in ours]) or now
            with ArmSpool(self.spool_dir) as spool:
                self._stream(ranges, start, end, now, report, spool)
                report.spooled_bytes += spool.bytes
                report.wakeups += self._arm_spool(spool)
            # A window a dead pass left (its start is earlier; stored to the millisecond): what
            # it inserted for a user erased since is not planned again, so not seen above.
            if since < now - dt.timedelta(milliseconds=1):
                self._sweep_dead_window(since, ours, now, (start, end))
            for p in ours:
                if not parts_store.finish(self.db, pid[p], me, end):
                    report.notes.append(
                        f"partition {p} passed to another creator during the pass; it plans it"
                    )
        report.planned_partitions += ours
        report.window_start = min(start, report.window_start or start)
        report.window_end = end

    def _stream(
        self,
        ranges: list[tuple[int, int]],
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
        report: PassReport,
        spool: ArmSpool,
    ) -> None:
        categories = self.settings.categories

        def pieces() -> Iterator[tuple[list[Doc], dict[str, Any]]]:
            for lo, hi in self._chunks(ranges):
                reminders, users, tokens_by_user = self._read_chunk(lo, hi)
                report.reminders += len(reminders)
                docs, skipped = plan_checked(
                    reminders, users, tokens_by_user, start, end, now, categories=categories
                )
                # Which user each was planned for (``_drop_erased``: one erased and created
                # again under the same id since this read is another).
                born = erasure.incarnations_of(users)
                del reminders, users, tokens_by_user
                self._report_bad(skipped, report)
                report.planned += len(docs)
                docs.sort(key=lambda d: (d["scheduledAt"], d["_id"]))
                for i in range(0, len(docs), INSERT_CHUNK):
                    yield docs[i : i + INSERT_CHUNK], born

        # Each piece is inserted while the next is read and planned, and spooled once its own
        # insert returned: a wake-up never names a message that is not in the database yet.
        # Reading and planning run ahead by up to a chunk (``_ahead``), so the database always
        # has the next read or insert waiting: without it, it idled while each chunk was planned
        # (a tenth of a pass's time at 100k).
        with ThreadPoolExecutor(1, thread_name_prefix="plan-insert") as pool:
            last: Future[list[Doc]] | None = None
            for piece, born in _ahead(pieces(), AHEAD_PIECES):
                nxt = pool.submit(self._insert_piece, piece, report, now, born)
                if last is not None:
                    spool.add(last.result())
                last = nxt
            if last is not None:
                spool.add(last.result())

    def _insert_piece(
        self,
        docs: list[Doc],
        report: PassReport,
        since: dt.datetime,
        born: Mapping[str, Any] | None = None,
    ) -> list[Doc]:
        """Insert a piece of a pass; what to arm: nothing of a user erased since the pass began
        (``_drop_erased``; or erased and created again since the pass read them, ``born``: their
        ``createdAt`` then), nothing of a reminder version replaced since (``_replan_changed``).
        Both look at the users the change log shows changed since the pass began: one small
        read per piece, after the insert (so that a change and the pass always see each other).
        """
        fresh: set[str] = set()
        out = self._insert(docs, report, fresh)
        changed = changed_users(self.db, since)
        gone = self._drop_erased(out, fresh, among=changed, read=born)
        stale = self._replan_changed(out, fresh, changed - gone)
        if gone or stale:
            out = [d for d in out if d["userId"] not in gone and d["_id"] not in stale]
        return out

    def _replan_changed(self, docs: list[Doc], fresh: set[str], changed: set[str]) -> set[str]:
        """After a pass's insert: the messages it inserted (``fresh``) from a reminder version a
        change replaced since the pass read it, for users in the change log (``changed``). They
        are ended ``cancelled`` and the reminders' current versions planned; their ids are
        returned (not to be armed).

        The change cancelled the old version's messages before this insert, so nothing else
        ends these; and its own planning of the new version may have come after this insert and
        been refused by the unique index, the old message holding the occurrence's slot: the
        consumer would cancel the old one at send and the occurrence would be lost. A change
        stamps the change log before it cancels (``Manager.supersede``), so this look, after the
        insert, sees it. Nothing has armed these messages yet (a pass arms after its inserts),
        so no consumer holds them."""
        mine = [d for d in docs if d["_id"] in fresh and d["userId"] in changed]
        if not mine:
            return set()
        ids = sorted({str(d["reminderId"]) for d in mine})
        current = {
            r["_id"]: r
            for r in self.db[dbm.REMINDERS].find(
                {"_id": {"$in": ids}}, {"version": 1, "active": 1, "isDeleted": 1}
            )
        }
        stale = [d for d in mine if _replaced(d, current.get(d["reminderId"]))]
        if not stale:
            return set()
        now = self.clock()
        # The consumer's words: removed or paused (nothing of it is planned again), else changed.
        gone = {d["reminderId"]: intent.reminder_gone(current.get(d["reminderId"])) for d in stale}
        why = {rid: reason or intent.REMINDER_CHANGED for rid, reason in gone.items()}
        self.db[dbm.MESSAGES].bulk_write(
            [end_message(d["_id"], Status.CANCELLED, why[d["reminderId"]], now) for d in stale],
            ordered=False,
        )
        alive = sorted({str(rid) for rid, why in gone.items() if why is None})
        if alive:
            users = sorted({str(d["userId"]) for d in stale if d["reminderId"] in alive})
            self.plan_users(users, reminders=alive)
        log.info("%d messages of replaced reminder versions ended and planned again", len(stale))
        return {d["_id"] for d in stale}

    def _chunks(self, ranges: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
        """Bucket ranges of about ``CHUNK_REMINDERS`` reminders each."""
        per_bucket = self.db[dbm.REMINDERS].estimated_document_count() / BUCKETS
        step = BUCKETS if per_bucket <= 0 else max(1, int(CHUNK_REMINDERS / per_bucket))
        for lo, hi in ranges:
            for a in range(lo, hi, step):
                yield a, min(a + step, hi)

    def _read_chunk(
        self, lo: int, hi: int
    ) -> tuple[list[Doc], dict[str, Doc], dict[str, list[Doc]]]:
        """The reminders, users and active tokens of the users in buckets ``[lo, hi)``: one
        index range each. Whole documents: the MongoDB-compatible server here applies
        projections in Python, a fifth to a third slower than returning them as stored."""
        rng = {"bucket": {"$gte": lo, "$lt": hi}}
        reminders = list(self.db[dbm.REMINDERS].find({**rng, "active": True, "isDeleted": False}))
        users = {d["_id"]: d for d in self.db[dbm.USERS].find(rng)}
        tokens_by_user: dict[str, list[Doc]] = defaultdict(list)
        for t in self.db[dbm.TOKENS].find({**rng, "isActive": True}):
            tokens_by_user[t["userId"]].append(t)
        return reminders, users, tokens_by_user

    def _arm_spool(self, spool: ArmSpool) -> int:
        """Arm everything spooled, merged in due order into full wake-ups; return how many."""
        c = self.settings.creator
        rows = group_sorted(
            spool.rows(),
            size=c.wakeup_size,
            window_s=self.settings.wakeup.window_seconds,
            planned_at=self.clock(),
        )
        armed = 0
        batch: list[WakeUp] = []
        for w in rows:
            batch.append(w)
            if len(batch) >= WAKEUP_BATCH:
                armed += len(self._send_wakeups(batch, None))
                batch = []
        armed += len(self._send_wakeups(batch, None))
        if armed and self.broker is not None:
            self.broker.flush()
        if armed and self.on_armed:
            self.on_armed(armed)
        return armed

    # -- a few users, in memory ------------------------------------------------------------
    def _plan_and_arm(
        self,
        reminders: list[Doc],
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
        report: PassReport,
        *,
        tokens: set[str] | None = None,
        known: Known | None = None,
    ) -> None:
        """Plan and arm the reminders of a few users (after a management change); ``tokens``:
        for these registrations only."""
        report.reminders += len(reminders)
        if not reminders:
            return
        # Only ``plan_checked`` looks inside a reminder: here a missing or odd userId must not
        # raise (the reminder is reported as bad by plan_checked).
        user_ids = {u for r in reminders if isinstance(u := r.get("userId"), str)}
        held = known or Known()
        read_users = {u for u in user_ids if u not in held.users}
        read_tokens = {u for u in user_ids if u not in held.tokens}
        users = self._load(dbm.USERS, "_id", read_users) if read_users else {}
        users.update({u: held.users[u] for u in user_ids - read_users})
        regs = (
            list(self._load(dbm.TOKENS, "userId", read_tokens, extra={"isActive": True}).values())
            if read_tokens
            else []
        )
        regs += [t for u in user_ids - read_tokens for t in held.tokens[u] if t.get("isActive")]
        tokens_by_user: dict[str, list[Doc]] = defaultdict(list)
        for t in regs:
            if tokens is None or t["_id"] in tokens:
                tokens_by_user[t["userId"]].append(t)
        docs, skipped = plan_checked(
            reminders,
            users,
            tokens_by_user,
            start,
            end,
            now,
            categories=self.settings.categories,
        )
        self._report_bad(skipped, report)
        report.planned += len(docs)
        docs.sort(key=lambda d: (d["category"], d["scheduledAt"], d["_id"]))
        fresh: set[str] = set()
        inserted = self._insert(docs, report, fresh) if docs else []
        if fresh:
            seen: dict[str, Any] = {}
            read = erasure.incarnations_of(users)
            gone = self._drop_erased(inserted, fresh, read=read, seen=seen)
            report.alive.update({u: at for u, at in seen.items() if u not in gone})
            report.erased |= gone
            if gone:
                inserted = [d for d in inserted if d["userId"] not in gone]
        try:
            armed = self._publish(inserted)
            if armed and self.broker is not None:
                self.broker.flush()
        except TransientError as exc:
            self._arm_later(inserted, start, end, now, exc, report)
            return
        report.wakeups += len(armed)

    def _arm_later(
        self,
        inserted: list[Doc],
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
        exc: TransientError,
        report: PassReport,
    ) -> None:
        """The broker could not take a change's wake-ups: its messages are in the database,
        and its users' partitions are marked to be planned again (``partitions.reopen``), so
        their next pass arms them as found. The change stands (a retry would only find it
        done; a 503 made a POST's retry a second reminder): said in the log and the report."""
        if not inserted:
            return
        users = {d["userId"] for d in inserted}
        parts_store.reopen(self.db, users, self.settings.creator.partitions, start, end, now)
        note = (
            f"{len(inserted)} message(s) planned but not armed ({exc}): the next planning pass "
            "arms them"
        )
        log.warning("%s", note)
        report.notes.append(note)

    def _drop_erased(
        self,
        docs: list[Doc],
        fresh: set[str],
        *,
        among: set[str] | None = None,
        read: Mapping[str, Any] | None = None,
        seen: dict[str, Any] | None = None,
    ) -> set[str]:
        """After an insert: the users of ``docs`` erased meanwhile (this planning read them
        before the erasure, whose own sweep ran before the insert), with what this call inserted
        for them (``fresh`` ids, and only those: a user re-created under the same id meanwhile
        keeps their new messages) ended and anonymised as the erasure does. A pass looks only
        at users its change log shows changed since it began (``among``); a planning of a few
        users looks them all up. ``read``: the users' ``createdAt`` as the planning read them; one
        found now with another was erased and created again since, and what was planned from
        the erased person's documents is theirs too. ``seen``: filled with the users found
        and their ``createdAt``."""
        users = {d["userId"] for d in docs if d["_id"] in fresh}
        if among is not None:
            users &= among
        found = erasure.incarnations(self.db, users)
        if seen is not None:
            seen.update(found)
        gone = erasure.gone(users, read or {}, found)
        for uid in sorted(gone):
            ids = [d["_id"] for d in docs if d["userId"] == uid and d["_id"] in fresh]
            ended, pseudonym = erasure.scrub_ids(self.db, ids, self.clock())
            self._log_swept(pseudonym, ended)
        return gone

    def _sweep_dead_window(
        self,
        since: dt.datetime,
        ours: Collection[int],
        now: dt.datetime,
        window: tuple[dt.datetime, dt.datetime],
    ) -> None:
        """A window a pass left when it died (begun at ``since``): what it inserted for a user of
        partitions ``ours`` erased since is ended and anonymised as the erasure does. Those
        users are not planned again, so nothing else finds it. Only messages planned before
        this pass began (``now``: the dead passes' start times come from creators' clocks, a
        lease apart at least): a user re-created under the same id after the look keeps the
        messages planned for them then. For the other users changed since, what it inserted
        for a registration deactivated since is ended too (``_end_for_dead_registrations``)."""
        n, mine = self.settings.creator.partitions, set(ours)
        users = {u for u in changed_users(self.db, since) if partition_of(bucket_of(u), n) in mine}
        gone = erasure.missing(self.db, users)
        for uid in sorted(gone):
            ended, _, pseudonym = erasure.scrub(self.db, uid, self.clock(), planned_before=now)
            self._log_swept(pseudonym, ended)
        self._sweep_recreated(sorted(users - gone), since, window, now)
        self._end_for_dead_registrations(sorted(users - gone), window, now)

    def _sweep_recreated(
        self,
        users: list[str],
        since: dt.datetime,
        window: tuple[dt.datetime, dt.datetime],
        now: dt.datetime,
    ) -> None:
        """Users of ``users`` (changed since a dead pass began, and existing) erased since then:
        created again under the same id, so ``_sweep_dead_window`` did not sweep them. What the
        dead pass planned from the erased person is pending under the new user, for
        registrations the erasure deleted: it is ended (if pending or missed) and anonymised as
        the erasure does (``erasure.scrub_ids``); the new user's messages, for registrations
        that exist, are kept. A thousand users a read of the change log's erasure stamps
        (``erased_since``); only for users erased since (usually none), a read of their
        messages in the window and, if any, of their registrations."""
        messages = self.db[dbm.MESSAGES]
        for i in range(0, len(users), LOOKUP):
            again = sorted(erased_since(self.db, users[i : i + LOOKUP], since))
            if not again:
                continue
            # Whatever their status: one may have ended meanwhile (missed past grace, or
            # cancelled by a change of a reminder id used again) and still carry the old text.
            # The messages first, then the registrations: a login in between is a registration
            # that exists, and its messages are not among those read.
            flt = {
                "userId": {"$in": again},
                "scheduledAt": {"$gte": window[0], "$lt": window[1]},
                "plannedAt": {"$lte": now},
            }
            found = list(messages.find(flt, {"userId": 1, "notificationTokenId": 1}))
            if not found:
                continue
            theirs = {
                t["_id"] for t in self.db[dbm.TOKENS].find({"userId": {"$in": again}}, {"_id": 1})
            }
            stale: dict[str, list[str]] = defaultdict(list)
            for d in found:
                tid = d.get("notificationTokenId")
                if isinstance(tid, str | int) and tid not in theirs:
                    stale[str(d["userId"])].append(d["_id"])
            for ids in stale.values():
                ended, pseudonym = erasure.scrub_ids(self.db, ids, self.clock())
                self._log_swept(pseudonym, ended)

    def _end_for_dead_registrations(
        self, users: list[str], window: tuple[dt.datetime, dt.datetime], now: dt.datetime
    ) -> None:
        """Pending messages of ``users`` due in a dead pass's ``window`` and planned before this
        pass (``now``) whose registration is no longer active: ended ``cancelled`` with the
        consumer's reason. This pass planned nothing for such a registration, so nothing arms
        them, and they ended ``is_missed`` past grace: a miss an operator would replay. A
        registration once deactivated stays so (a new login is a new registration, with new
        message ids), so ending them early loses nothing; a user who turned notifications off,
        which can be undone under the same ids, is left to the consumer as before. A thousand
        users a read of their registrations turned off (``tokens_by_user``), and only for the
        users that have one, a read of their messages (``(userId, scheduledAt)``)."""
        messages = self.db[dbm.MESSAGES]
        for i in range(0, len(users), LOOKUP):
            # Their registrations turned off (usually none: then no message is read at all).
            off = {
                t["_id"]: t
                for t in self.db[dbm.TOKENS].find(
                    {"userId": {"$in": users[i : i + LOOKUP]}, "isActive": False},
                    {"userId": 1, "deactivationReason": 1},
                )
            }
            if not off:
                continue
            flt = {
                "userId": {"$in": sorted({str(t["userId"]) for t in off.values()})},
                "scheduledAt": {"$gte": window[0], "$lt": window[1]},
                "status": Status.PENDING.value,
                "isDeleted": False,
                "plannedAt": {"$lte": now},
                "notificationTokenId": {"$in": list(off)},
            }
            ends = []
            at = self.clock()
            for d in messages.find(flt, {"notificationTokenId": 1}):
                tid = d.get("notificationTokenId")
                if not isinstance(tid, str | int) or tid not in off:
                    continue  # written by hand: the consumer judges (and reports) it
                reason = intent.token_off(off[tid])
                ends.append(end_message(d["_id"], Status.CANCELLED, reason, at))
            if ends:
                messages.bulk_write(ends, ordered=False)
                log.info(
                    "%d messages of a dead pass for registrations gone since: cancelled", len(ends)
                )

    def _log_swept(self, pseudonym: str, ended: int) -> None:
        log.warning(
            "a user was erased while a planning held their documents: %d messages planned for "
            "them cancelled and anonymised",
            ended,
            extra={"user_id": pseudonym},
        )

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
        if len(ids) <= SCAN_THRESHOLD:
            # The indexed field first: the server here picks its index by the filter's first
            # field (``{isActive, userId}`` scanned every token: 21 ms at 1,100 tokens).
            flt: dict[str, Any] = {key: {"$in": sorted(ids)}, **(extra or {})}
            return {d["_id"]: d for d in self.db[coll].find(flt)}
        flt = dict(extra or {})
        return {d["_id"]: d for d in self.db[coll].find(flt) if d.get(key) in ids}

    def _insert(
        self, docs: list[Doc], report: PassReport, fresh: set[str] | None = None
    ) -> list[Doc]:
        """Insert, ignoring duplicates; return what should be armed (new and already pending).
        ``fresh``: gets the ids this call inserted (not those found there)."""
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
        if fresh is not None:
            refused = {d["_id"] for d in duplicates}
            fresh.update(d["_id"] for d in docs if d["_id"] not in refused)
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
        """Which duplicates are this very occurrence (same ``_id``) rather than another pending
        message holding the same user/token/category/label/instant.

        Up to ``SCAN_THRESHOLD``: looked up. Above (a pass re-planning a window a crashed or
        concurrent pass already planned), all are taken as the same occurrence: a lookup per
        id costs about a millisecond here, and a chunk of users spans the whole window, so one
        index range would read every partition's messages per chunk. Arming a conflicting id
        (never inserted: a twin reminder's, say) sends nothing: the consumer finds no such
        message and dead-letters that id (an error log and a DLQ entry), the rest of its wake-up
        goes on.
        """
        ids = {d["_id"] for d in docs}
        if len(ids) > SCAN_THRESHOLD:
            return ids
        coll = self.db[dbm.MESSAGES]
        return {d["_id"] for d in coll.find({"_id": {"$in": sorted(ids)}}, {"_id": 1})}


LOOKUP = 1000  # users per read of a dead window's messages


def _replaced(message: Doc, reminder: Doc | None) -> bool:
    """Whether ``message`` was planned from a version of ``reminder`` that is no longer current
    (or from a reminder that is gone). A version is 1 when missing, as everywhere; a version
    that is not a number (written by hand) is left to the consumer's check."""
    if reminder is None:
        return True
    try:
        return int(reminder.get("version", 1)) != int(message.get("reminderVersion", 1))
    except (TypeError, ValueError):
        return False


def _ahead(items: Iterator[T], depth: int) -> Iterator[T]:
    """``items``, produced by a thread of their own up to ``depth`` ahead of the consumer.

    The producer's exception is raised in the consumer; a consumer that stops early (an
    exception, a ``break``) stops the producer at its next item."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth} (0 would be unbounded)")
    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(entry, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(("item", item)):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            put(("error", exc))
            return
        put(("end", None))

    thread = threading.Thread(target=produce, name="plan-read", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


def _merged(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Adjacent bucket ranges joined (partitions 0..7 of 16 are one range)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _ranges(ps: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    out: list[str] = []
    for p in sorted(ps):
        if out and out[-1].split("-")[-1] == str(p - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{p}"
        else:
            out.append(str(p))
    return ",".join(out) or "none"
