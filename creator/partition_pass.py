"""A planning pass over the partitions this creator holds, streamed a chunk of users at a time.

Per partition, a pass plans the window ``[plannedUntil, now + horizon)`` (from ``now`` when
nothing is planned yet, and at most ``MAX_CATCH_UP`` back after an outage) for every active
reminder, inserts the messages (duplicates refused by their deterministic ``_id``), arms
wake-ups, then moves the partition's watermark. The window is marked ``inProgress`` on each
partition before any insert, so a pass that dies between writing and arming is planned again
from that window's start by whichever creator holds the partition next: what it inserted is
refused as a duplicate and armed as found. Arming twice is harmless: consumers take each
message through the send guard.

Memory does not grow with the number of reminders: a pass reads its partitions a chunk of users
at a time (a range of buckets, about ``CHUNK_REMINDERS`` reminders), inserts each chunk while a
thread of its own reads and plans the next (``stream.ahead``: at most about two chunks held),
spools what it inserted to local disk as sorted runs, and arms once every chunk is in, merging
the runs in due order (``creator/spool.py``): wake-ups as full as if the whole window had been
planned at once.

A reminder, user or token the document rules refuse is skipped and reported
(``PassReport.skipped``); the pass plans everything else and moves the watermark as usual. The
holder of partition ``JANITOR_PARTITION`` runs the janitor once per pass, so once per interval
for the fleet.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from creator.context import PlanContext
from creator.inserts import Inserter
from creator.janitor import sweep
from creator.repairs import Repairs
from creator.report import PassReport, ranges
from creator.spool import ArmSpool
from creator.stream import ahead, chunks, merged
from creator.user_planner import UserPlanner
from creator.wakeups import WakeupPublisher
from shared.domain.messages import Doc
from shared.domain.plan import BUCKETS, MAX_CATCH_UP, group_sorted, partition_buckets, plan_checked
from shared.store import erasure
from shared.store.abc_planning import Window
from shared.store.intent import changed_in
from shared.store.partitions import Membership, partition_id

# A planning chunk: a range of buckets holding about this many reminders (estimated from the
# collection's size). Peak memory follows it, not the number of reminders.
CHUNK_REMINDERS = 20_000
INSERT_CHUNK = 5000  # planned messages per insert (a piece)
# Pieces queued ahead of their insert: about a chunk's worth when each reminder makes one
# message; at least one (a queue of 0 would be unbounded).
AHEAD_PIECES = max(1, CHUNK_REMINDERS // INSERT_CHUNK)
JANITOR_PARTITION = 0  # its holder runs the janitor (once per pass for the fleet)


class PartitionPass:
    """Runs planning passes over the partitions of a ``Membership``.

    ``keep_leases``: keep the partitions between passes (the service, renewed by its heartbeat);
    else a pass takes its share, plans it and gives it back. ``spool_dir``: where arming runs
    are spooled (None: TMPDIR)."""

    def __init__(
        self,
        ctx: PlanContext,
        membership: Membership,
        publisher: WakeupPublisher,
        inserter: Inserter,
        repairs: Repairs,
        users: UserPlanner,
    ) -> None:
        self.ctx = ctx
        self.membership = membership
        self.publisher = publisher
        self.inserter = inserter
        self.repairs = repairs
        self.users = users
        self.keep_leases = False
        self.spool_dir: str | None = None

    def run(self) -> PassReport:
        """One pass over the partitions this creator holds, then (for the holder of partition
        ``JANITOR_PARTITION``) the janitor. Idempotent."""
        t0 = time.perf_counter()
        report = PassReport()
        now = self.ctx.clock()
        filled = self.ctx.stores.partitions.backfill_buckets()
        if filled:
            report.notes.append(f"{filled} users, reminders or tokens given their bucket")
        try:
            held = self.membership.sync(now)
            report.partitions = sorted(held)
            if held:
                self._run_partitions(held, now, report)
            else:
                report.notes.append(
                    f"all {self.ctx.settings.creator.partitions} partitions are held by live "
                    f"creators ({len(self.membership.live) - 1} others)"
                )
        finally:
            if not self.keep_leases:
                self.membership.leave()
        report.seconds = time.perf_counter() - t0
        return report

    def _run_partitions(self, held: set[int], now: dt.datetime, report: PassReport) -> None:
        c = self.ctx.settings.creator
        docs = self.ctx.stores.partitions.ensure(c.partitions)
        mine = {p: docs[p] for p in held}
        # An interrupted pass of these partitions is planned again from its window's start:
        # the inserts find what it inserted (the same ids), arm it as found, insert the rest.
        interrupted: dict[int, dt.datetime] = {}
        for p, d in mine.items():
            if prog := d.get("inProgress"):
                interrupted[p] = prog["from"]
        if interrupted:
            report.notes.append(
                f"planning again the window of an interrupted pass (partitions "
                f"{ranges(interrupted)})"
            )
        # From the watermark even when it is past (the creator was down longer than the
        # horizon): every missed occurrence is created, so it ends terminal, never absent.
        end = now + dt.timedelta(hours=c.horizon_hours)
        # In slices: reading every reminder is paid when a slice of the horizon is unplanned,
        # a few times a day; passes in between read one document per partition.
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
            # As of now, not of the pass's start: a long pass would leave what became overdue
            # meanwhile for the next interval.
            report.missed = sweep(self.ctx.stores.pending, self.ctx.settings, self.ctx.clock())

    def _plan_window(
        self,
        ps: list[int],
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
        report: PassReport,
    ) -> None:
        """Plan ``[start, end)`` for the users of partitions ``ps``, a chunk at a time."""
        c = self.ctx.settings.creator
        store = self.ctx.stores.partitions
        me = self.membership.me
        pid = {p: partition_id(p, c.partitions) for p in ps}
        with self.membership.hold(ps):
            window = Window(start, end, now)
            ours = [p for p in ps if store.begin(pid[p], me, window)]
            if not ours:
                return
            bucket_ranges = merged(partition_buckets(p, c.partitions) for p in ours)
            since = store.in_progress_since([pid[p] for p in ours]) or now
            with ArmSpool(self.spool_dir) as spool:
                self._stream(bucket_ranges, start, end, now, report, spool)
                report.spooled_bytes += spool.bytes
                report.wakeups += self.publisher.arm_all(
                    group_sorted(
                        spool.rows(),
                        size=c.wakeup_size,
                        window_s=self.ctx.settings.wakeup.window_seconds,
                        planned_at=self.ctx.clock(),
                    )
                )
            # A window a dead pass left (its start is earlier; stored to the millisecond).
            if since < now - dt.timedelta(milliseconds=1):
                self.repairs.sweep_dead_window(since, ours, window)
            for p in ours:
                if not store.finish(pid[p], me, end):
                    report.notes.append(
                        f"partition {p} passed to another creator during the pass; it plans it"
                    )
        report.planned_partitions += ours
        report.window_start = min(start, report.window_start or start)
        report.window_end = end

    def _stream(
        self,
        bucket_ranges: list[tuple[int, int]],
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
        report: PassReport,
        spool: ArmSpool,
    ) -> None:
        categories = self.ctx.settings.categories
        per_bucket = self.ctx.stores.plans.reminders_per_bucket()

        def pieces() -> Iterator[tuple[list[Doc], dict[str, Any]]]:
            for lo, hi in chunks(bucket_ranges, per_bucket, CHUNK_REMINDERS, BUCKETS):
                reminders, users, tokens_by_user = self.read_chunk(lo, hi)
                report.reminders += len(reminders)
                docs, skipped = plan_checked(
                    reminders, users, tokens_by_user, start, end, now, categories=categories
                )
                born = erasure.incarnations_of(users)  # who each was planned for
                del reminders, users, tokens_by_user
                report.add_skipped(skipped)
                report.planned += len(docs)
                docs.sort(key=lambda d: (d["scheduledAt"], d["_id"]))
                for i in range(0, len(docs), INSERT_CHUNK):
                    yield docs[i : i + INSERT_CHUNK], born

        # Each piece is inserted while the next is read and planned, and spooled once its own
        # insert returned: a wake-up never names a message that is not in the database yet.
        with ThreadPoolExecutor(1, thread_name_prefix="plan-insert") as pool:
            last: Future[list[Doc]] | None = None
            for piece, born in ahead(pieces(), AHEAD_PIECES):
                nxt = pool.submit(self.insert_piece, piece, report, now, born)
                if last is not None:
                    spool.add(last.result())
                last = nxt
            if last is not None:
                spool.add(last.result())

    def read_chunk(
        self, lo: int, hi: int
    ) -> tuple[list[Doc], dict[str, Doc], dict[str, list[Doc]]]:
        """The active reminders, users and active tokens of buckets ``[lo, hi)``."""
        return self.ctx.stores.plans.read_buckets(lo, hi)

    def insert_piece(
        self,
        docs: list[Doc],
        report: PassReport,
        since: dt.datetime,
        born: Mapping[str, Any] | None = None,
    ) -> list[Doc]:
        """Insert a piece of a pass; returns what to arm: nothing of a user erased since the
        pass began (``since``) or erased and created again since it read them (``born``: their
        ``createdAt`` then), nothing of a reminder version replaced since (both repaired:
        ``Repairs``). One read of the change log per piece, after the insert."""
        fresh: set[str] = set()
        out = self.inserter.insert(docs, report, fresh)
        changed = changed_in(self.ctx.stores.changes, since)
        gone = self.repairs.drop_erased(out, fresh, among=changed, read=born)
        stale = self.repairs.replan_changed(out, fresh, changed - gone, self._replan)
        if gone or stale:
            out = [d for d in out if d["userId"] not in gone and d["_id"] not in stale]
        return out

    def _replan(self, users: Sequence[str], reminders: Collection[str]) -> None:
        self.users.plan(users, reminders=reminders)
