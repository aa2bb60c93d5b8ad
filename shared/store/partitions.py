"""Planning partitions: which creator plans which users, and how far each is planned.

Users are split into ``creator.partitions`` partitions by a stable hash of the user id
(``shared.domain.plan.bucket_of``; a partition is a range of buckets). One document per
partition (``PartitionStore``; ``planner_partitions`` on MongoDB):

    {_id: "<p>/<P>", p, of: P, owner, leaseUntil, plannedUntil, inProgress: {from, to, at}}

- ``plannedUntil`` is the partition's watermark and ``inProgress`` the window of a pass that
  has started and not finished (planned again from its start by the next holder): the single
  watermark of earlier versions, per partition. The ``_id`` names the partition count too, so
  changing it starts a new set of documents, seeded conservatively from the old ones (the
  earliest watermark, every interrupted window: ``seed``): planning a window twice only meets
  duplicates the database refuses.
- ``owner`` / ``leaseUntil``: a lease. A creator holds a partition while it renews the lease;
  a creator that dies stops renewing, and once ``leaseUntil`` has passed another creator takes
  the partition with a compare-and-set. Every write of a watermark is conditional on the
  owner, so a creator that lost a partition (paused past its lease) cannot move it.
- The live creators (``planner_creators``: ``{_id: creatorId, heartbeatAt, host, pid}``), so
  each creator sees the others and takes its share (``shared.domain.plan.owned_partitions``).

Why leases in the database rather than the broker's message groups (a scheduled planning tick
per partition with ``JMSXGroupID``): the database is already where the watermark lives, so the
hold and the watermark are one compare-and-set on one document, testable against the real
server with an injected clock; a message group re-assigns a partition only when the broker
notices the consumer's connection is gone, and says nothing about the watermark or an
interrupted window.

Documents written before buckets existed, or by writers that do not set one (raw inserts, the
HTTP API), get theirs from ``PartitionStore.backfill_buckets`` at the start of every pass: an
index lookup of ``{bucket: null}`` on MongoDB, which finds nothing in steady state.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
import threading
from collections.abc import Collection, Iterable, Iterator

from shared.domain.messages import Doc
from shared.domain.plan import bucket_of, owned_partitions, partition_of
from shared.store.abc_planning import PartitionStore, Window

# The single watermark document of creators before partitions (``planner_state`` on MongoDB).
LEGACY_ID = "planner"


def partition_id(p: int, partitions: int) -> str:
    """The id of partition ``p`` of ``partitions``."""
    return f"{p}/{partitions}"


def partitions_of(user_ids: Iterable[str], partitions: int) -> dict[str, int]:
    """Each user's partition: the one holding the user's bucket."""
    return {u: partition_of(bucket_of(u), partitions) for u in user_ids}


def seed(olds: list[Doc]) -> Doc:
    """A new partition's watermark from ``olds`` (the partition documents of other counts and
    the legacy watermark, if any): the earliest of theirs (None unless every one has a date),
    and every interrupted window joined in one; no owner."""
    if not olds:
        return {"owner": None, "leaseUntil": None, "plannedUntil": None}
    untils = [o.get("plannedUntil") for o in olds]
    dated = [u for u in untils if isinstance(u, dt.datetime)]
    until = min(dated) if dated and len(dated) == len(untils) else None
    out: Doc = {"owner": None, "leaseUntil": None, "plannedUntil": until}
    windows = [o["inProgress"] for o in olds if isinstance(o.get("inProgress"), dict)]
    if windows:
        out["inProgress"] = {
            "from": min(w["from"] for w in windows),
            "to": max(w["to"] for w in windows),
            "at": min(w["at"] for w in windows),
        }
    return out


def mark(doc: Doc, reach: bool) -> dt.datetime | None:
    """A watermark document's ``plannedUntil``; with ``reach``, the end of its window in
    progress when that is later: how far messages may already exist (a pass running or dead
    before its watermark moved), what a change must cancel up to."""
    planned: dt.datetime | None = doc.get("plannedUntil")
    prog = doc.get("inProgress")
    if reach and prog and (planned is None or prog["to"] > planned):
        return prog["to"]
    return planned


def in_progress(window: Window) -> Doc:
    """The partition's ``inProgress`` document of ``window``."""
    return {"from": window.start, "to": window.end, "at": window.at}


# -- leases ------------------------------------------------------------------------------------
def creator_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


class Membership:
    """One creator's place among the running creators and the partitions it holds.

    ``sync`` (every pass, and every third of the lease in the service): heartbeat, read who
    is live, take this creator's share (``owned_partitions``) where free or expired, renew it,
    and give back what belongs to others now, except partitions a pass is planning (``busy``:
    given back once it ends). ``leave`` gives everything back at once (a clean stop).
    """

    def __init__(
        self,
        store: PartitionStore,
        partitions: int,
        lease_s: float,
        me: str | None = None,
    ) -> None:
        self.store = store
        self.partitions = partitions
        self.lease = dt.timedelta(seconds=lease_s)
        self.me = me or creator_id()
        self.busy: set[int] = set()
        self.held: set[int] = set()
        self.live: list[str] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, parts: Collection[int]) -> Iterator[None]:
        """Keep these partitions while a pass plans them, even if the share moved meanwhile."""
        with self._lock:
            self.busy |= set(parts)
        try:
            yield
        finally:
            with self._lock:
                self.busy -= set(parts)

    def register(self, now: dt.datetime) -> None:
        """Heartbeat only: make this creator live, so that the others give it its share."""
        self.store.heartbeat(self.me, now, {"host": socket.gethostname(), "pid": os.getpid()})

    def live_at(self, now: dt.datetime) -> list[str]:
        """The creators (this one among them once registered) whose heartbeat is within a
        lease of ``now``, sorted."""
        return self.store.live_since(now - self.lease)

    def others_live(self, now: dt.datetime) -> list[str]:
        """The other creators whose heartbeat is within a lease of ``now``."""
        return [c for c in self.live_at(now) if c != self.me]

    def sync(self, now: dt.datetime) -> set[int]:
        """Heartbeat and rebalance; return the partitions held (as of the database)."""
        self.store.ensure(self.partitions)
        self.register(now)
        self.live = self.live_at(now)
        with self._lock:
            wanted = owned_partitions(self.me, self.live, self.partitions) | self.busy
        ids = [partition_id(p, self.partitions) for p in sorted(wanted)]
        self.store.take(self.me, ids, now + self.lease, now)
        mine = self.store.held(self.me, self.partitions)
        self._release(mine - wanted)
        self.held = mine & wanted
        return set(self.held)

    def _release(self, parts: Collection[int]) -> None:
        if parts:
            self.store.release(self.me, [partition_id(p, self.partitions) for p in parts])

    def leave(self) -> None:
        """Give back every partition and leave the live set (others take them at once)."""
        self.store.release(self.me)
        self.store.forget(self.me)
        self.held = set()


__all__ = [
    "LEGACY_ID",
    "Membership",
    "creator_id",
    "mark",
    "partition_id",
    "partitions_of",
    "seed",
]
