"""Registrations in memory: the semantics of ``shared.store.mongo.tokens``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection

from shared.domain.messages import Doc
from shared.store.memory.base import Tables, later, out


class MemoryTokens:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def by_ids(self, ids: Collection[str]) -> dict[str, Doc]:
        with self.t.lock:
            return {i: out(d) for i in ids if (d := self.t.tokens.get(i)) is not None}

    def deactivate(self, token_ids: Collection[str], reason: str, now: dt.datetime) -> list[Doc]:
        with self.t.lock:
            return self._turn_off(sorted(token_ids), reason, now)

    def deactivate_where(
        self, match: Callable[[Doc], bool], reason: str, now: dt.datetime
    ) -> list[Doc]:
        """Turn off every active registration ``match`` accepts (``MongoTokens
        .deactivate_matching`` with a filter); those this call turned off (``_id``, ``userId``)."""
        with self.t.lock:
            return self._turn_off([i for i, d in self.t.tokens.items() if match(d)], reason, now)

    def _turn_off(self, ids: list[str], reason: str, now: dt.datetime) -> list[Doc]:
        off: list[Doc] = []
        for i in ids:
            d = self.t.tokens.get(i)
            if d is None or d.get("isActive") is not True:
                continue
            d.update(isActive=False, deactivatedAt=now, deactivationReason=reason, updatedAt=now)
            off.append({"_id": i, **({"userId": d["userId"]} if "userId" in d else {})})
        return off

    def count_failure(
        self, token_id: str, at: dt.datetime, message_id: str | None, now: dt.datetime
    ) -> Doc | None:
        with self.t.lock:
            d = self.t.tokens.get(token_id)
            if d is None:
                return None
            failed = d.get("failedMessages") or []
            if not later(d.get("failureResetAt"), at) and not (message_id and message_id in failed):
                d["failureCount"] = int(d.get("failureCount", 0)) + 1
                last = d.get("lastFailureAt")
                if not isinstance(last, dt.datetime) or at > last:
                    d["lastFailureAt"] = at
                d["updatedAt"] = now
                if message_id:
                    d["failedMessages"] = [*failed, message_id]
                return out(d)
            if message_id and message_id in failed:  # counted before: its deactivation may be due
                return out(d)
            return None

    def failing(self) -> set[str]:
        with self.t.lock:
            return {
                i
                for i, d in self.t.tokens.items()
                if isinstance(c := d.get("failureCount"), int) and c > 0
            }

    def reset_failures(self, token_id: str, at: dt.datetime, now: dt.datetime) -> bool:
        with self.t.lock:
            d = self.t.tokens.get(token_id)
            count = None if d is None else d.get("failureCount")
            if d is None or not isinstance(count, int) or count <= 0:
                return False
            if later(d.get("lastFailureAt"), at):
                return False
            d.update(failureCount=0, failedMessages=[], updatedAt=now)
            reset = d.get("failureResetAt")
            if not isinstance(reset, dt.datetime) or at > reset:
                d["failureResetAt"] = at
            return True
