"""The send journal in memory: the semantics of ``shared.store.mongo.journal``."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Collection

from shared.domain.messages import Doc
from shared.store.memory.base import Tables, out


class MemoryJournal:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def add(self, doc: Doc) -> None:
        with self.t.lock:
            self.t.journal.setdefault(doc["_id"], copy.deepcopy(doc))

    def left(self, consumer: str | None = None, before: dt.datetime | None = None) -> list[Doc]:
        with self.t.lock:
            return [
                out(d)
                for d in self.t.journal.values()
                if (consumer is None or d.get("consumer") == consumer)
                and (before is None or (isinstance(d.get("at"), dt.datetime) and d["at"] < before))
            ]

    def delete(self, ids: Collection[str]) -> None:
        with self.t.lock:
            for i in ids:
                self.t.journal.pop(i, None)
