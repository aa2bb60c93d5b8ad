"""The HTTP API's own records in memory: the semantics of ``shared.store.mongo.web`` (an
``_id`` taken refuses a claim; take-over, release and cut are compare-and-sets)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from shared.clock import Clock
from shared.domain.messages import Doc
from shared.store.abc_web import WebStores
from shared.store.memory.base import Tables, out, set_fields


def _is(doc: Doc, name: str, value: Any) -> bool:
    """MongoDB's equality filter ``{name: value}``: ``None`` matches a missing field too."""
    return doc.get(name) is None if value is None else bool(doc.get(name) == value)


class MemoryIdempotency:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def clock(self, local: Clock, read_every: dt.timedelta) -> Clock:
        return local

    def claim(self, record: Doc) -> bool:
        with self.t.lock:
            if record["_id"] in self.t.idempotency:
                return False
            self.t.idempotency[record["_id"]] = out(record)
            return True

    def get(self, record_id: str) -> Doc | None:
        return self.t.get("idempotency", record_id)

    def drop_expired(self, record_id: str, created_at: Any) -> None:
        with self.t.lock:
            d = self.t.idempotency.get(record_id)
            if d is not None and _is(d, "createdAt", created_at):
                del self.t.idempotency[record_id]

    def take_over(
        self, record_id: str, state: Any, claimed_at: Any, fields: Mapping[str, Any]
    ) -> bool:
        with self.t.lock:
            d = self.t.idempotency.get(record_id)
            if d is None or not (_is(d, "state", state) and _is(d, "claimedAt", claimed_at)):
                return False
            before = out(d)
            set_fields(d, fields)
            return d != before  # as MongoDB's modified count: a write that changes nothing is 0

    def complete(self, record_id: str, fields: Mapping[str, Any]) -> None:
        with self.t.lock:
            d = self.t.idempotency.get(record_id)
            if d is not None:
                set_fields(d, fields)

    def release(self, record_id: str, attempt: str | None) -> None:
        with self.t.lock:
            d = self.t.idempotency.get(record_id)
            if d is not None and _is(d, "state", "running") and _is(d, "attempt", attempt):
                del self.t.idempotency[record_id]

    def cut(self, record_id: str, attempt: str | None, claimed_at: dt.datetime) -> None:
        with self.t.lock:
            d = self.t.idempotency.get(record_id)
            if d is not None and _is(d, "state", "running") and _is(d, "attempt", attempt):
                d["claimedAt"] = claimed_at

    def ensure_expiry(self) -> None:
        """Nothing to make: the twin lives for a test, and the API checks ages on read."""


class MemorySessions:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def add(self, session: Doc) -> None:
        with self.t.lock:
            if session["_id"] in self.t.sessions:
                raise KeyError(f"console session {session['_id']} exists")
            self.t.sessions[session["_id"]] = out(session)

    def get(self, session_id: str) -> Doc | None:
        return self.t.get("sessions", session_id)

    def delete(self, session_id: str) -> None:
        with self.t.lock:
            self.t.sessions.pop(session_id, None)

    def ensure_expiry(self) -> None:
        """Nothing to make: the twin lives for a test, and the console checks ``expiresAt``."""


def memory_web_stores(tables: Tables | None = None) -> WebStores:
    """The HTTP API's own stores over ``tables`` (new, empty ones by default)."""
    t = tables or Tables()
    return WebStores(idempotency=MemoryIdempotency(t), sessions=MemorySessions(t))
