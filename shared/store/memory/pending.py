"""Pending messages by due instant in memory, the guards on them, their ends, the server's
clock and stopped replays: the semantics of ``shared.store.mongo.pending`` (replays settled by
the rule of ``shared.store.replays.settle``, fenced first)."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Collection, Generator, Sequence

from shared.domain.messages import Doc, Status, terminal_update
from shared.domain.replay import LEASE, settle_one
from shared.store.abc import ConsumerStores, Ending, Guard
from shared.store.memory.base import Tables, out, set_fields
from shared.store.memory.messages import MemoryMessages

log = logging.getLogger("shared.store.replays")


def _record(doc: Doc) -> Doc:
    rec = doc.get("replay")
    return rec if isinstance(rec, dict) else {}


class MemoryPending:
    def __init__(self, tables: Tables, consumer: ConsumerStores) -> None:
        self.t = tables
        self._consumer = consumer

    @property
    def name(self) -> str:
        return f"memory-{id(self.t):x}"

    @property
    def consumer(self) -> ConsumerStores:
        return self._consumer

    def _due(self, start: dt.datetime, end: dt.datetime) -> list[Doc]:
        with self.t.lock:
            return [
                d
                for d in self.t.messages.values()
                if d.get("status") == Status.PENDING.value
                and d.get("isDeleted") is False
                and isinstance(at := d.get("scheduledAt"), dt.datetime)
                and start <= at < end
            ]

    def due(self, start: dt.datetime, end: dt.datetime, batch: int) -> Generator[Doc, None, None]:
        with self.t.lock:
            found = [out(d) for d in self._due(start, end)]
        found.sort(key=lambda d: d["scheduledAt"])  # stable: ties in insertion order
        yield from found

    def due_fields(
        self, start: dt.datetime, end: dt.datetime, fields: Sequence[str]
    ) -> Generator[Doc, None, None]:
        with self.t.lock:
            found = [
                out({k: d[k] for k in ("_id", *fields) if k in d}) for d in self._due(start, end)
            ]
        yield from found

    def count_due(self, start: dt.datetime, end: dt.datetime) -> int:
        return len(self._due(start, end))

    def guards_on(self, ids: Collection[str]) -> list[Guard]:
        with self.t.lock:
            found = [d for i in sorted(set(ids)) if (d := self.t.guards.get(i)) is not None]
            return [Guard(d["_id"], str(d.get("owner")), d.get("at")) for d in found]

    def end(self, endings: Sequence[Ending]) -> int:
        return MemoryMessages(self.t).end(endings)

    def server_now(self) -> dt.datetime | None:
        clock = self.t.server_clock
        return None if clock is None else clock()

    # -- replays that stopped -------------------------------------------------------------------
    def settle_stale_replays(self, now: dt.datetime, settler: str) -> int:
        with self.t.lock:
            holders: set[str | None] = set()
            for d in self.t.messages.values():
                rec = _record(d)
                lease = rec.get("leaseUntil")
                if d.get("status") == Status.REPLAYING.value and (
                    rec.get("holder") is None or not isinstance(lease, dt.datetime) or lease < now
                ):
                    holders.add(rec.get("holder"))
            return sum(self._settle(h, settler, now) for h in holders)

    def _settle(self, holder: str | None, settler: str, now: dt.datetime) -> int:
        """Fence ``holder``'s messages, then end each by the attempt records (under the lock)."""
        fence = f"{settler}:{uuid.uuid4().hex[:8]}"
        mine = []
        for d in self.t.messages.values():
            rec = _record(d)
            at = rec.get("at")
            old = holder is None and isinstance(at, dt.datetime) and at >= now - LEASE
            if (
                d.get("status") == Status.REPLAYING.value
                and rec.get("holder") == holder
                and not old
            ):
                set_fields(d, {"replay.holder": fence})
                mine.append(d)
        runs = {_record(d).get(k) for d in mine for k in ("run", "sender")}
        maybe_left = {
            i
            for a in self.t.attempts.values()
            if a.get("consumer") in runs and a.get("consumer") is not None
            for i in a.get("ids", [])
        }
        for d in mine:
            s = settle_one(_record(d), d["_id"] in maybe_left, now)
            if s.unknown:
                set_fields(d, terminal_update(s.status, s.reason, now))
            else:
                set_fields(
                    d,
                    {
                        "status": s.status.value,
                        "replay.holder": None,
                        "replay.leftMissed": s.reason,
                        "replay.leftAt": now,
                    },
                )
                d["replay"].pop("leaseUntil", None)
        if mine:
            log.warning("settled a stopped replay (%s): %d messages", holder, len(mine))
        return len(mine)
