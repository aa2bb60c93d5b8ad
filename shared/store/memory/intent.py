"""The intent-change log, daily-cap counters and current users and reminders in memory: the
semantics of ``shared.store.mongo.intent``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

from shared.domain.messages import Doc
from shared.store.memory.base import Tables, out


class MemoryIntentLog:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def record(self, user_ids: Collection[str], now: dt.datetime, *, erased: bool = False) -> None:
        with self.t.lock:
            for u in set(user_ids):
                d = self.t.changes.setdefault(u, {"_id": u})
                d["at"] = now
                if erased:
                    d["erasedAt"] = now

    def changed_since(self, since: dt.datetime) -> set[str]:
        with self.t.lock:
            return {
                u
                for u, d in self.t.changes.items()
                if isinstance(u, str) and isinstance(d.get("at"), dt.datetime) and d["at"] >= since
            }

    def erased_since(self, user_ids: Collection[str], since: dt.datetime) -> set[str]:
        with self.t.lock:
            return {
                u
                for u in user_ids
                if isinstance(at := self.t.changes.get(u, {}).get("erasedAt"), dt.datetime)
                and at >= since
            }


class MemoryCapCounters:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def reserve(self, key: str, user_id: str, want: int, limit: int, now: dt.datetime) -> bool:
        with self.t.lock:
            d = self.t.counters.get(key)
            if d is None:
                self.t.counters[key] = {"_id": key, "count": want, "userId": user_id, "at": now}
                return True
            if int(d.get("count", 0)) > limit - want:
                return False  # MongoDB: the upsert collides with the counter (duplicate key)
            d["count"] = int(d.get("count", 0)) + want
            return True

    def count(self, key: str) -> int:
        with self.t.lock:
            return int(self.t.counters.get(key, {}).get("count", 0))

    def refund(self, refunds: Sequence[tuple[str, str]]) -> None:
        with self.t.lock:
            for key, message_id in refunds:
                d = self.t.counters.get(key)
                if d is None or message_id in d.setdefault("refunded", []):
                    continue
                d["count"] = int(d.get("count", 0)) - 1
                d["refunded"].append(message_id)


class MemoryCurrentIntent:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def users(self, ids: Collection[str]) -> dict[str, Doc]:
        with self.t.lock:
            return {i: out(d) for i in ids if (d := self.t.users.get(i)) is not None}

    def reminders(self, ids: Collection[str]) -> dict[str, Doc]:
        with self.t.lock:
            return {i: out(d) for i in ids if (d := self.t.reminders.get(i)) is not None}
