"""Messages in memory: the semantics of ``shared.store.mongo.messages``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from shared.domain.messages import Doc, Status, terminal_update
from shared.store.abc import Ending, Outcome
from shared.store.memory.base import Tables, dotted, out, set_fields


class MemoryMessages:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def pending_ids(self, start: dt.datetime, end: dt.datetime) -> frozenset[str]:
        with self.t.lock:
            return frozenset(
                i
                for i, d in self.t.messages.items()
                if d.get("status") == Status.PENDING.value
                and d.get("isDeleted") is False
                and isinstance(d.get("scheduledAt"), dt.datetime)
                and start <= d["scheduledAt"] <= end
            )

    def statuses(self, ids: Collection[str]) -> dict[str, str]:
        with self.t.lock:
            return {i: str(d.get("status")) for i in ids if (d := self.t.messages.get(i))}

    def get(self, message_id: str) -> Doc | None:
        return self.t.get("messages", message_id)

    def end(self, endings: Sequence[Ending]) -> int:
        n = 0
        with self.t.lock:
            for e in endings:
                d = self.t.messages.get(e.id)
                if d is not None and d.get("status") == e.expect.value:
                    set_fields(d, terminal_update(e.status, e.reason, e.at, **e.fields))
                    n += 1
        return n

    def apply(self, outcomes: Sequence[Outcome]) -> None:
        with self.t.lock:
            for o in outcomes:
                d = self.t.messages.get(o.id)
                if d is not None and d.get("finishedAt") != o.at:
                    set_fields(d, o.fields)

    def receipts_due(self, now: dt.datetime, limit: int) -> list[Doc]:
        with self.t.lock:
            due = [
                out(d)
                for d in self.t.messages.values()
                if dotted(d, "receipt.state") == "pending"
                and isinstance(at := dotted(d, "receipt.checkAfter"), dt.datetime)
                and at <= now
            ]
        return due[:limit]

    def set_fields(self, changes: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        with self.t.lock:
            for i, fields in changes:
                d = self.t.messages.get(i)
                if d is not None:
                    set_fields(d, fields)
