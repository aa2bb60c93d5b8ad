"""Partitions, live creators and the backfill of buckets in memory: the semantics of
``shared.store.mongo.partitions`` (``$min``/``$max`` as MongoDB orders a date against what is
there, a lease taken only where free, own or expired)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable

from shared.domain.messages import Doc
from shared.domain.plan import bucket_of
from shared.store.abc_planning import Window
from shared.store.memory.base import Tables, out
from shared.store.partitions import LEGACY_ID, in_progress, mark, partition_id, partitions_of, seed


def _min(doc: Doc, name: str, value: dt.datetime) -> None:
    """``$min`` of a date: set where missing, the earlier of two dates; anything else there
    (null, a number, a string) orders before a date in MongoDB and stays."""
    if name not in doc:
        doc[name] = value
    elif isinstance(doc[name], dt.datetime):
        doc[name] = min(doc[name], value)


def _max(doc: Doc, name: str, value: dt.datetime) -> None:
    """``$max`` of a date: the later of two dates; anything else (missing, null, a number, a
    string) orders before a date and is replaced."""
    if not isinstance(doc.get(name), dt.datetime) or doc[name] < value:
        doc[name] = value


def _window(doc: Doc) -> Doc | None:
    """The partition's ``inProgress`` to update in place (made when missing), or None when it
    is there but not a document (MongoDB refuses the update; the caller replaces it)."""
    prog = doc.setdefault("inProgress", {})
    return prog if isinstance(prog, dict) else None


class MemoryPartitions:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def backfill_buckets(self) -> int:
        done = 0
        with self.t.lock:
            for rows, key in (
                (self.t.users, "_id"),
                (self.t.reminders, "userId"),
                (self.t.tokens, "userId"),
            ):
                for d in rows.values():
                    if d.get("bucket") is None and isinstance(v := d.get(key), str):
                        d["bucket"] = bucket_of(v)
                        done += 1
        return done

    def ensure(self, partitions: int) -> dict[int, Doc]:
        with self.t.lock:
            rows = self.t.partitions
            docs = {d["p"]: d for d in rows.values() if d.get("of") == partitions}
            if len(docs) < partitions:
                olds = [d for d in rows.values() if d.get("of") != partitions]
                if LEGACY_ID in self.t.state:
                    olds.append(self.t.state[LEGACY_ID])
                first = seed(olds)
                for p in range(partitions):
                    pid = partition_id(p, partitions)
                    if p not in docs and pid not in rows:
                        rows[pid] = {"_id": pid, "p": p, "of": partitions, **out(first)}
                docs = {d["p"]: d for d in rows.values() if d.get("of") == partitions}
            return {p: out(d) for p, d in docs.items()}

    def begin(self, pid: str, owner: str, window: Window) -> bool:
        with self.t.lock:
            doc = self.t.partitions.get(pid)
            if doc is None or doc.get("owner") != owner:
                return False
            prog = _window(doc)
            if prog is None:
                doc["inProgress"] = in_progress(window)
            else:
                prog.update({"from": window.start, "to": window.end})
                _min(prog, "at", window.at)
            return True

    def reopen(self, user_ids: Iterable[str], partitions: int, window: Window) -> None:
        pids = {partition_id(p, partitions) for p in partitions_of(user_ids, partitions).values()}
        with self.t.lock:
            for pid in sorted(pids):
                doc = self.t.partitions.get(pid)
                if doc is None:
                    continue
                prog = _window(doc)
                if prog is None:
                    doc["inProgress"] = in_progress(window)
                    continue
                _min(prog, "from", window.start)
                _min(prog, "at", window.at)
                _max(prog, "to", window.end)

    def in_progress_since(self, pids: Iterable[str]) -> dt.datetime | None:
        with self.t.lock:
            docs = [d for pid in set(pids) if (d := self.t.partitions.get(pid)) is not None]
            ats = [
                at
                for d in docs
                if isinstance(at := (d.get("inProgress") or {}).get("at"), dt.datetime)
            ]
        return min(ats, default=None)

    def finish(self, pid: str, owner: str, end: dt.datetime) -> bool:
        with self.t.lock:
            doc = self.t.partitions.get(pid)
            if doc is None or doc.get("owner") != owner:
                return False
            _max(doc, "plannedUntil", end)
            doc.pop("inProgress", None)
            return True

    def watermarks(
        self, user_ids: Iterable[str], partitions: int, *, reach: bool = False
    ) -> dict[str, dt.datetime | None]:
        parts = partitions_of(user_ids, partitions)
        ids = {partition_id(p, partitions) for p in parts.values()}
        if not ids:
            return {}
        with self.t.lock:
            docs = [d for i in ids if (d := self.t.partitions.get(i)) is not None]
            found = {d["p"]: mark(d, reach) for d in docs}
            if len(found) < len(ids):  # partition documents not created yet: the legacy one
                legacy = mark(self.t.state.get(LEGACY_ID) or {}, reach)
                for p in parts.values():
                    found.setdefault(p, legacy)
        return {u: found.get(p) for u, p in parts.items()}

    # -- creators and leases --------------------------------------------------------------------
    def heartbeat(self, creator: str, now: dt.datetime, fields: Doc) -> None:
        with self.t.lock:
            doc = self.t.creators.setdefault(creator, {"_id": creator, "startedAt": now})
            doc.update(out({"heartbeatAt": now, **fields}))

    def live_since(self, since: dt.datetime) -> list[str]:
        with self.t.lock:
            return sorted(
                i
                for i, d in self.t.creators.items()
                if isinstance(at := d.get("heartbeatAt"), dt.datetime) and at >= since
            )

    def forget(self, creator: str) -> None:
        with self.t.lock:
            self.t.creators.pop(creator, None)

    def take(
        self, creator: str, pids: Collection[str], until: dt.datetime, now: dt.datetime
    ) -> None:
        with self.t.lock:
            for pid in set(pids):
                doc = self.t.partitions.get(pid)
                if doc is None:
                    continue
                lease = doc.get("leaseUntil")
                expired = isinstance(lease, dt.datetime) and lease < now
                if doc.get("owner") in (None, creator) or expired:
                    doc.update(owner=creator, leaseUntil=until)

    def held(self, creator: str, partitions: int) -> set[int]:
        with self.t.lock:
            return {
                d["p"]
                for d in self.t.partitions.values()
                if d.get("owner") == creator and d.get("of") == partitions
            }

    def release(self, creator: str, pids: Collection[str] | None = None) -> None:
        with self.t.lock:
            for pid, doc in self.t.partitions.items():
                if doc.get("owner") == creator and (pids is None or pid in pids):
                    doc.update(owner=None, leaseUntil=None)
