"""What every in-memory store shares: one lock over one set of tables, and copies at the edge.

Each operation holds the lock from its read to its write, which is what makes a compare-and-set
or a refused duplicate atomic here, as a single-document write is on MongoDB. Documents go in and
out as copies, as they do over the wire.
"""

from __future__ import annotations

import copy
import datetime as dt
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.domain.messages import Doc


@dataclass
class Tables:
    """The twin's data, by table and ``_id``; tests seed it through ``put``."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    users: dict[str, Doc] = field(default_factory=dict)
    reminders: dict[str, Doc] = field(default_factory=dict)
    tokens: dict[str, Doc] = field(default_factory=dict)
    messages: dict[str, Doc] = field(default_factory=dict)
    guards: dict[str, Doc] = field(default_factory=dict)
    fences: dict[str, Doc] = field(default_factory=dict)
    attempts: dict[str, Doc] = field(default_factory=dict)
    journal: dict[str, Doc] = field(default_factory=dict)
    changes: dict[str, Doc] = field(default_factory=dict)
    counters: dict[str, Doc] = field(default_factory=dict)
    senders: dict[str, Doc] = field(default_factory=dict)
    idempotency: dict[str, Doc] = field(default_factory=dict)  # the API's Idempotency-Key records
    sessions: dict[str, Doc] = field(default_factory=dict)  # the console's logins
    partitions: dict[str, Doc] = field(default_factory=dict)
    creators: dict[str, Doc] = field(default_factory=dict)
    state: dict[str, Doc] = field(default_factory=dict)  # planner_state: the legacy watermark
    # What the twin says the database server's clock is (``PendingStore.server_now``; a test
    # gives its fake clock); None: it says none, as a server that does not report its time.
    server_clock: Callable[[], dt.datetime] | None = None

    def put(self, table: str, *docs: Doc) -> None:
        """Insert or replace ``docs`` (by ``_id``) in ``table``."""
        with self.lock:
            rows: dict[str, Doc] = getattr(self, table)
            for d in docs:
                rows[d["_id"]] = copy.deepcopy(d)

    def get(self, table: str, doc_id: str) -> Doc | None:
        with self.lock:
            d = getattr(self, table).get(doc_id)
            return None if d is None else copy.deepcopy(d)


def out(doc: Doc) -> Doc:
    return copy.deepcopy(doc)


def set_fields(doc: Doc, fields: Mapping[str, Any]) -> None:
    """``$set`` on ``doc``: dotted names reach into sub-documents, made as needed."""
    for name, value in fields.items():
        *path, last = name.split(".")
        at = doc
        for part in path:
            nxt = at.get(part)
            if not isinstance(nxt, dict):
                nxt = at[part] = {}
            at = nxt
        at[last] = copy.deepcopy(value)


def later(value: object, than: dt.datetime) -> bool:
    """MongoDB's ``{$gt: than}`` on a field: false for a missing value or one not a date."""
    return isinstance(value, dt.datetime) and value > than


def dotted(doc: Doc, name: str) -> object:
    at: object = doc
    for part in name.split("."):
        if not isinstance(at, dict):
            return None
        at = at.get(part)
    return at
