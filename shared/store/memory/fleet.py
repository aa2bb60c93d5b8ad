"""The registry of live senders in memory: the semantics of ``shared.store.mongo.fleet``."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from typing import Any

from shared.domain.messages import Doc
from shared.store.memory.base import Tables, out


class MemorySenders:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def beat(
        self, sender_id: str, now: dt.datetime, fields: Mapping[str, Any], first: Mapping[str, Any]
    ) -> None:
        with self.t.lock:
            d = self.t.senders.get(sender_id)
            if d is None:
                d = self.t.senders[sender_id] = {"_id": sender_id, **copy.deepcopy(dict(first))}
            d.update(heartbeatAt=now, **copy.deepcopy(dict(fields)))

    def live_since(self, since: dt.datetime) -> list[Doc]:
        with self.t.lock:
            return [
                out(d)
                for d in self.t.senders.values()
                if isinstance(d.get("heartbeatAt"), dt.datetime) and d["heartbeatAt"] >= since
            ]

    def leave(self, sender_id: str) -> None:
        with self.t.lock:
            self.t.senders.pop(sender_id, None)
