"""Which message ids are still pending, by due window: one index range shared by a whole herd.

A point lookup costs about a millisecond per id on the MongoDB-compatible server used here, an
index range about a tenth of that per document, and every wake-up of a herd covers the same
window. So the first wake-up of a window asks once for every pending id due in it, and the
others reuse the answer. Staleness is safe in one direction only, and that is the one allowed:
a message that left ``pending`` after the query is caught by the send guard (handled) or by the
intent-change log (cancelled by a management command).
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass

from shared.clock import Clock, ms_of, utcnow
from shared.store.abc import MessageStore

MAX_AGE_S = 60.0
PLANNED_SKEW_MS = 5000  # a wake-up planned after the query started must not trust it


@dataclass
class _Entry:
    start: dt.datetime
    end: dt.datetime
    fetched_ms: int
    ids: frozenset[str]


class PendingCache:
    def __init__(self, messages: MessageStore, span_s: float = 60.0, clock: Clock = utcnow) -> None:
        self.messages = messages
        self.clock = clock
        self.span = dt.timedelta(seconds=span_s)
        self._entries: list[_Entry] = []
        self._lock = threading.Lock()
        self.queries = 0

    def pending(self, start: dt.datetime, end: dt.datetime, planned_ms: int) -> frozenset[str]:
        """Pending ids with ``start <= scheduledAt <= end`` (possibly a superset window)."""
        with self._lock:
            now_ms = ms_of(self.clock)
            self._entries = [e for e in self._entries if now_ms - e.fetched_ms < MAX_AGE_S * 1000]
            for e in self._entries:
                if (
                    e.start <= start
                    and end <= e.end
                    and planned_ms + PLANNED_SKEW_MS < e.fetched_ms
                ):
                    return e.ids
            q_end = max(end, start + self.span)
            fetched_ms = now_ms
            ids = self.messages.pending_ids(start, q_end)
            self.queries += 1
            self._entries.append(_Entry(start, q_end, fetched_ms, ids))
            return ids
