"""Partitions on MongoDB (``planner_partitions``, ``planner_creators``, the legacy watermark in
``planner_state``) and the backfill of buckets. The rule they serve is in
``shared/store/partitions.py``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable

from pymongo import UpdateOne
from pymongo.database import Database
from pymongo.errors import BulkWriteError, WriteError

from shared.domain.messages import Doc
from shared.domain.plan import bucket_of
from shared.store import db as dbm
from shared.store.abc_planning import Window
from shared.store.partitions import LEGACY_ID, in_progress, mark, partition_id, partitions_of, seed

BACKFILL_CHUNK = 500


class MongoPartitions:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database
        self.coll = dbm.critical(database, dbm.PARTITIONS)
        self.creators = dbm.critical(database, dbm.CREATORS)

    # -- buckets on documents -------------------------------------------------------------------
    def backfill_buckets(self) -> int:
        # Steady state: three index lookups (``{bucket: null}``) that find nothing.
        done = 0
        for coll, key in ((dbm.USERS, "_id"), (dbm.REMINDERS, "userId"), (dbm.TOKENS, "userId")):
            ops = [
                UpdateOne({"_id": d["_id"], "bucket": None}, {"$set": {"bucket": bucket_of(v)}})
                for d in self.db[coll].find({"bucket": None}, {key: 1})
                if isinstance(v := d.get(key), str)
            ]
            for i in range(0, len(ops), BACKFILL_CHUNK):
                part = ops[i : i + BACKFILL_CHUNK]
                done += self.db[coll].bulk_write(part, ordered=False).modified_count
        return done

    # -- partition documents --------------------------------------------------------------------
    def ensure(self, partitions: int) -> dict[int, Doc]:
        docs = {d["p"]: d for d in self.coll.find({"of": partitions})}
        if len(docs) < partitions:
            olds = list(self.coll.find({"of": {"$ne": partitions}}))
            legacy = self.db[dbm.STATE].find_one({"_id": LEGACY_ID})
            if legacy is not None:
                olds.append(legacy)
            first = seed(olds)
            new = [
                {"_id": partition_id(p, partitions), "p": p, "of": partitions, **first}
                for p in range(partitions)
                if p not in docs
            ]
            try:
                self.coll.insert_many(new, ordered=False)
            except BulkWriteError as exc:  # another creator created some at the same time
                if any(e.get("code") != 11000 for e in exc.details.get("writeErrors", [])):
                    raise
            docs = {d["p"]: d for d in self.coll.find({"of": partitions})}
        return docs

    def begin(self, pid: str, owner: str, window: Window) -> bool:
        mine = {"_id": pid, "owner": owner}
        try:
            res = self.coll.update_one(
                mine,
                {
                    "$set": {"inProgress.from": window.start, "inProgress.to": window.end},
                    "$min": {"inProgress.at": window.at},
                },
            )
        except WriteError:  # ``inProgress`` is there but not a document (null, by hand): replaced
            res = self.coll.update_one(mine, {"$set": {"inProgress": in_progress(window)}})
        return res.matched_count == 1

    def reopen(self, user_ids: Iterable[str], partitions: int, window: Window) -> None:
        pids = {partition_id(p, partitions) for p in partitions_of(user_ids, partitions).values()}
        for pid in sorted(pids):
            try:
                self.coll.update_one(
                    {"_id": pid},
                    {
                        "$min": {"inProgress.from": window.start, "inProgress.at": window.at},
                        "$max": {"inProgress.to": window.end},
                    },
                )
            except WriteError:  # ``inProgress`` is there but not a document (null, by hand)
                self.coll.update_one({"_id": pid}, {"$set": {"inProgress": in_progress(window)}})

    def in_progress_since(self, pids: Iterable[str]) -> dt.datetime | None:
        ats = [
            at
            for d in self.coll.find({"_id": {"$in": sorted(pids)}})
            if isinstance(at := (d.get("inProgress") or {}).get("at"), dt.datetime)
        ]
        return min(ats, default=None)

    def finish(self, pid: str, owner: str, end: dt.datetime) -> bool:
        res = self.coll.update_one(
            {"_id": pid, "owner": owner},
            {"$max": {"plannedUntil": end}, "$unset": {"inProgress": ""}},
        )
        return res.matched_count == 1

    def watermarks(
        self, user_ids: Iterable[str], partitions: int, *, reach: bool = False
    ) -> dict[str, dt.datetime | None]:
        parts = partitions_of(user_ids, partitions)
        ids = sorted({partition_id(p, partitions) for p in parts.values()})
        if not ids:
            return {}
        found = {d["p"]: mark(d, reach) for d in self.coll.find({"_id": {"$in": ids}})}
        if len(found) < len(ids):  # partition documents not created yet: the legacy watermark
            legacy = mark(self.db[dbm.STATE].find_one({"_id": LEGACY_ID}) or {}, reach)
            for p in parts.values():
                found.setdefault(p, legacy)
        return {u: found.get(p) for u, p in parts.items()}

    # -- creators and leases --------------------------------------------------------------------
    def heartbeat(self, creator: str, now: dt.datetime, fields: Doc) -> None:
        self.creators.update_one(
            {"_id": creator},
            {"$set": {"heartbeatAt": now, **fields}, "$setOnInsert": {"startedAt": now}},
            upsert=True,
        )

    def live_since(self, since: dt.datetime) -> list[str]:
        found = self.creators.find({"heartbeatAt": {"$gte": since}}, {"_id": 1})
        return sorted(d["_id"] for d in found)

    def forget(self, creator: str) -> None:
        self.creators.delete_one({"_id": creator})

    def take(
        self, creator: str, pids: Collection[str], until: dt.datetime, now: dt.datetime
    ) -> None:
        self.coll.update_many(
            {
                "_id": {"$in": list(pids)},
                "$or": [{"owner": None}, {"owner": creator}, {"leaseUntil": {"$lt": now}}],
            },
            {"$set": {"owner": creator, "leaseUntil": until}},
        )

    def held(self, creator: str, partitions: int) -> set[int]:
        return {d["p"] for d in self.coll.find({"owner": creator, "of": partitions}, {"p": 1})}

    def release(self, creator: str, pids: Collection[str] | None = None) -> None:
        flt: Doc = {"owner": creator}
        if pids is not None:  # ``_id`` first: SecantusDB picks an index by the filter's first
            # field (plain MongoDB picks by cost, whatever the order)
            flt = {"_id": {"$in": list(pids)}, "owner": creator}
        self.coll.update_many(flt, {"$set": {"owner": None, "leaseUntil": None}})
