"""Send guards, fences and attempt records in memory: the semantics of
``shared.store.mongo.guards`` (a guard that exists refuses the insert; takeover is a
compare-and-set on holder and time)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

from shared.store.abc import Guard
from shared.store.memory.base import Tables


class MemoryGuards:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def take(
        self, ids: Sequence[str], owner: str, now: dt.datetime, wakeup: str | None = None
    ) -> set[str]:
        got: set[str] = set()
        with self.t.lock:
            for i in ids:
                if i not in self.t.guards:
                    self.t.guards[i] = {"_id": i, "owner": owner, "wakeup": wakeup, "at": now}
                    got.add(i)
        return got

    def holder(self, message_id: str) -> Guard | None:
        with self.t.lock:
            d = self.t.guards.get(message_id)
            return None if d is None else Guard.of(d)

    def take_over(self, guard: Guard, owner: str, now: dt.datetime, wakeup: str) -> bool:
        with self.t.lock:
            d = self.t.guards.get(guard.id)
            if d is None or d.get("owner") != guard.owner or d.get("at") != guard.at:
                return False
            d.update(owner=owner, at=now, wakeup=wakeup, takenOverFrom=guard.owner)
            return True

    def release(self, ids: Collection[str], owner: str, *, budget_s: float | None = None) -> None:
        with self.t.lock:
            for i in ids:
                if self.t.guards.get(i, {}).get("owner") == owner:
                    del self.t.guards[i]

    def fence(self, holder: str, by: str, now: dt.datetime) -> None:
        with self.t.lock:
            self.t.fences[holder] = {"_id": holder, "by": by, "at": now}

    def fenced_by(self, consumer: str) -> str | None:
        with self.t.lock:
            d = self.t.fences.get(consumer)
            return None if d is None else str(d.get("by"))

    def record_attempt(
        self, record_id: str, consumer: str, at: dt.datetime, ids: Sequence[str]
    ) -> None:
        with self.t.lock:
            if record_id in self.t.attempts:
                raise KeyError(f"attempt record {record_id} exists")
            self.t.attempts[record_id] = {
                "_id": record_id,
                "consumer": consumer,
                "at": at,
                "ids": list(ids),
            }

    def maybe_sent(self, consumer: str) -> set[str]:
        with self.t.lock:
            return {
                i for d in self.t.attempts.values() if d["consumer"] == consumer for i in d["ids"]
            }

    def in_attempt(self, consumer: object, message_id: str) -> bool:
        with self.t.lock:
            return any(
                d["consumer"] == consumer and message_id in d["ids"]
                for d in self.t.attempts.values()
            )

    def drop_attempts(self, record_ids: Collection[str]) -> None:
        with self.t.lock:
            for r in record_ids:
                self.t.attempts.pop(r, None)
