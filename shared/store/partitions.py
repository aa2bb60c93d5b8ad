"""Planning partitions in MongoDB: which creator plans which users, and how far each is planned.

Users are split into ``creator.partitions`` partitions by a stable hash of the user id
(``shared.domain.plan.bucket_of``; a partition is a range of buckets). One document per
partition in ``planner_partitions``:

    {_id: "<p>/<P>", p, of: P, owner, leaseUntil, plannedUntil, inProgress: {from, to, at}}

- ``plannedUntil`` is the partition's watermark and ``inProgress`` the window of a pass that
  has started and not finished (planned again from its start by the next holder): the single
  watermark of earlier versions, per partition. The ``_id`` names the partition count too, so
  changing it starts a new set of documents, seeded conservatively from the old ones (the
  earliest watermark, every interrupted window): planning a window twice only meets duplicates
  the database refuses.
- ``owner`` / ``leaseUntil``: a lease. A creator holds a partition while it renews the lease;
  a creator that dies stops renewing, and once ``leaseUntil`` has passed another creator takes
  the partition with a compare-and-set. Every write of a watermark is conditional on the
  owner, so a creator that lost a partition (paused past its lease) cannot move it.
- ``planner_creators``: ``{_id: creatorId, heartbeatAt, host, pid}``, so each creator sees the
  others and takes its share (``shared.domain.plan.owned_partitions``).

Why leases in MongoDB rather than the broker's message groups (a scheduled planning tick per
partition with ``JMSXGroupID``): MongoDB is already where the watermark lives, so the hold and
the watermark are one compare-and-set on one document, testable against the real server with
an injected clock; a message group re-assigns a partition only when the broker notices the
consumer's connection is gone, and says nothing about the watermark or an interrupted window.

Documents written before buckets existed, or by writers that do not set one (raw inserts, the
HTTP API), get theirs from ``backfill_buckets`` at the start of every pass: an index lookup
of ``{bucket: null}``, which finds nothing in steady state.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
import threading
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database
from pymongo.errors import BulkWriteError, WriteError

from shared.domain.messages import Doc
from shared.domain.plan import bucket_of, owned_partitions, partition_of
from shared.store import db as dbm

# The single watermark document of creators before partitions (in planner_state).
LEGACY_ID = "planner"
BACKFILL_CHUNK = 500


def partition_id(p: int, partitions: int) -> str:
    """The id of partition ``p`` of ``partitions``."""
    return f"{p}/{partitions}"


# -- buckets on documents ---------------------------------------------------------------------
def backfill_buckets(database: Database[Doc]) -> int:
    """Give every user, reminder and token without a ``bucket`` its bucket; return how many.

    Steady state: three index lookups that find nothing. A document whose user id is not a
    string gets none and is never planned (``tzpush doctor`` lists it).
    """
    done = 0
    for coll, key in ((dbm.USERS, "_id"), (dbm.REMINDERS, "userId"), (dbm.TOKENS, "userId")):
        ops = [
            UpdateOne({"_id": d["_id"], "bucket": None}, {"$set": {"bucket": bucket_of(v)}})
            for d in database[coll].find({"bucket": None}, {key: 1})
            if isinstance(v := d.get(key), str)
        ]
        for i in range(0, len(ops), BACKFILL_CHUNK):
            done += (
                database[coll].bulk_write(ops[i : i + BACKFILL_CHUNK], ordered=False).modified_count
            )
    return done


# -- partition documents -----------------------------------------------------------------------
def ensure_partitions(database: Database[Doc], partitions: int) -> dict[int, Doc]:
    """The documents of all ``partitions`` partitions, created on first use."""
    coll = dbm.critical(database, dbm.PARTITIONS)
    docs = {d["p"]: d for d in coll.find({"of": partitions})}
    if len(docs) < partitions:
        first = _seed(database, partitions)
        new = [
            {"_id": partition_id(p, partitions), "p": p, "of": partitions, **first}
            for p in range(partitions)
            if p not in docs
        ]
        try:
            coll.insert_many(new, ordered=False)
        except BulkWriteError as exc:  # another creator created some at the same time
            if any(e.get("code") != 11000 for e in exc.details.get("writeErrors", [])):
                raise
        docs = {d["p"]: d for d in coll.find({"of": partitions})}
    return docs


def _seed(database: Database[Doc], partitions: int) -> Doc:
    """A new partition's watermark from the partition documents of other counts and the legacy
    single watermark (``seed``)."""
    olds = list(dbm.critical(database, dbm.PARTITIONS).find({"of": {"$ne": partitions}}))
    legacy = database[dbm.STATE].find_one({"_id": LEGACY_ID})
    if legacy is not None:
        olds.append(legacy)
    return seed(olds)


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


def begin(
    database: Database[Doc], pid: str, owner: str, start: dt.datetime, end: dt.datetime, now: Any
) -> bool:
    """Mark the partition's window in progress (before any insert); False if not ours.

    ``inProgress.at`` keeps the earliest start among the passes that planned the window: a pass
    planning again a window a dead pass left looks for users erased since the dead one began
    (``Repairs.sweep_dead_window``)."""
    coll = dbm.critical(database, dbm.PARTITIONS)
    mine = {"_id": pid, "owner": owner}
    try:
        res = coll.update_one(
            mine,
            {
                "$set": {"inProgress.from": start, "inProgress.to": end},
                "$min": {"inProgress.at": now},
            },
        )
    except WriteError:  # ``inProgress`` is there but not a document (null, by hand): replaced
        res = coll.update_one(mine, {"$set": {"inProgress": {"from": start, "to": end, "at": now}}})
    return res.matched_count == 1


def reopen(
    database: Database[Doc],
    user_ids: Iterable[str],
    partitions: int,
    start: dt.datetime,
    end: dt.datetime,
    now: Any,
) -> None:
    """Mark the window ``[start, end)`` of these users' partitions to be planned again by their
    next pass, whoever holds them: what a change planned there could not be armed (the broker
    away). The pass finds those messages by their ids and arms them as found
    (``PartitionPass._run_partitions``); a window already marked is widened, never narrowed."""
    coll = dbm.critical(database, dbm.PARTITIONS)
    pids = {partition_id(p, partitions) for p in partitions_of(user_ids, partitions).values()}
    for pid in sorted(pids):
        try:
            coll.update_one(
                {"_id": pid},
                {
                    "$min": {"inProgress.from": start, "inProgress.at": now},
                    "$max": {"inProgress.to": end},
                },
            )
        except WriteError:  # ``inProgress`` is there but not a document (null, by hand)
            window = {"from": start, "to": end, "at": now}
            coll.update_one({"_id": pid}, {"$set": {"inProgress": window}})


def in_progress_since(database: Database[Doc], pids: Iterable[str]) -> dt.datetime | None:
    """The earliest ``inProgress.at`` of these partitions (None: none in progress)."""
    ats = [
        at
        for d in dbm.critical(database, dbm.PARTITIONS).find({"_id": {"$in": sorted(pids)}})
        if isinstance(at := (d.get("inProgress") or {}).get("at"), dt.datetime)
    ]
    return min(ats, default=None)


def finish(database: Database[Doc], pid: str, owner: str, end: dt.datetime) -> bool:
    """Move the partition's watermark to ``end`` and clear its window; False if not ours."""
    res = dbm.critical(database, dbm.PARTITIONS).update_one(
        {"_id": pid, "owner": owner},
        {"$max": {"plannedUntil": end}, "$unset": {"inProgress": ""}},
    )
    return res.matched_count == 1


def watermarks(
    database: Database[Doc], user_ids: Iterable[str], partitions: int, *, reach: bool = False
) -> dict[str, dt.datetime | None]:
    """Each user's partition watermark (None: nothing planned yet for that partition).

    ``reach``: how far messages may already exist instead, the end of a window in progress when
    it lies beyond the watermark (a pass running or dead before its watermark moved): what a
    change must cancel up to, since that pass may have inserted the old version's messages."""
    parts = partitions_of(user_ids, partitions)
    ids = sorted({partition_id(p, partitions) for p in parts.values()})
    if not ids:
        return {}
    found = {
        d["p"]: mark(d, reach)
        for d in dbm.critical(database, dbm.PARTITIONS).find({"_id": {"$in": ids}})
    }
    if len(found) < len(ids):  # partition documents not created yet: the legacy watermark
        legacy = mark(database[dbm.STATE].find_one({"_id": LEGACY_ID}) or {}, reach)
        for p in parts.values():
            found.setdefault(p, legacy)
    return {u: found.get(p) for u, p in parts.items()}


def partitions_of(user_ids: Iterable[str], partitions: int) -> dict[str, int]:
    """Each user's partition: the one holding the user's bucket."""
    return {u: partition_of(bucket_of(u), partitions) for u in user_ids}


def mark(doc: Doc, reach: bool) -> dt.datetime | None:
    """A watermark document's ``plannedUntil``; with ``reach``, the end of its window in
    progress when that is later: how far messages may already exist (a pass running or dead
    before its watermark moved), what a change must cancel up to."""
    planned: dt.datetime | None = doc.get("plannedUntil")
    prog = doc.get("inProgress")
    if reach and prog and (planned is None or prog["to"] > planned):
        return prog["to"]
    return planned


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
        database: Database[Doc],
        partitions: int,
        lease_s: float,
        me: str | None = None,
    ) -> None:
        self.db = database
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
        dbm.critical(self.db, dbm.CREATORS).update_one(
            {"_id": self.me},
            {
                "$set": {"heartbeatAt": now, "host": socket.gethostname(), "pid": os.getpid()},
                "$setOnInsert": {"startedAt": now},
            },
            upsert=True,
        )

    def live_at(self, now: dt.datetime) -> list[str]:
        """The creators (this one among them once registered) whose heartbeat is within a
        lease of ``now``, sorted."""
        found = dbm.critical(self.db, dbm.CREATORS).find(
            {"heartbeatAt": {"$gte": now - self.lease}}, {"_id": 1}
        )
        return sorted(d["_id"] for d in found)

    def others_live(self, now: dt.datetime) -> list[str]:
        """The other creators whose heartbeat is within a lease of ``now``."""
        return [c for c in self.live_at(now) if c != self.me]

    def sync(self, now: dt.datetime) -> set[int]:
        """Heartbeat and rebalance; return the partitions held (as of the database)."""
        ensure_partitions(self.db, self.partitions)
        self.register(now)
        self.live = self.live_at(now)
        with self._lock:
            wanted = owned_partitions(self.me, self.live, self.partitions) | self.busy
        coll = dbm.critical(self.db, dbm.PARTITIONS)
        ids = [partition_id(p, self.partitions) for p in sorted(wanted)]
        coll.update_many(
            {
                "_id": {"$in": ids},
                "$or": [{"owner": None}, {"owner": self.me}, {"leaseUntil": {"$lt": now}}],
            },
            {"$set": {"owner": self.me, "leaseUntil": now + self.lease}},
        )
        mine = {d["p"] for d in coll.find({"owner": self.me, "of": self.partitions}, {"p": 1})}
        self._release(mine - wanted)
        self.held = mine & wanted
        return set(self.held)

    def _release(self, parts: Collection[int]) -> None:
        if parts:
            ids = [partition_id(p, self.partitions) for p in parts]
            dbm.critical(self.db, dbm.PARTITIONS).update_many(
                {"_id": {"$in": ids}, "owner": self.me},
                {"$set": {"owner": None, "leaseUntil": None}},
            )

    def leave(self) -> None:
        """Give back every partition and leave the live set (others take them at once)."""
        dbm.critical(self.db, dbm.PARTITIONS).update_many(
            {"owner": self.me}, {"$set": {"owner": None, "leaseUntil": None}}
        )
        dbm.critical(self.db, dbm.CREATORS).delete_one({"_id": self.me})
        self.held = set()


__all__ = [
    "LEGACY_ID",
    "Membership",
    "backfill_buckets",
    "begin",
    "creator_id",
    "ensure_partitions",
    "finish",
    "mark",
    "partition_id",
    "partitions_of",
    "seed",
    "watermarks",
]
