"""The intent check as the consumer asks it: which users changed lately, and the verdicts.

Preparation asks with the users changed since the wake-up was planned; the final check just
before sending asks with the changes of the last second (one read shared by every due group)
and reserves the daily caps. The rules themselves are ``consumer.judge``.
"""

from __future__ import annotations

import datetime as dt
import threading

from consumer.judge import End, judge
from shared.clock import Clock, instant_ms, ms_of
from shared.settings import Settings
from shared.store import intent as stored_intent
from shared.store.abc import ConsumerStores
from shared.wire import Item, WakeUp

# How long one read of the intent-change log answers every due group's final check.
CHANGES_TTL_S = 1.0


class IntentCheck:
    def __init__(self, settings: Settings, stores: ConsumerStores, clock: Clock) -> None:
        self.settings = settings
        self.stores = stores
        self.clock = clock
        self._lock = threading.Lock()
        self._changes: set[str] = set()
        self._changes_at: dt.datetime | None = None

    def recent_changes(self) -> set[str]:
        """Users whose intent changed lately: one query shared by every batch due now.

        A herd is many wake-ups due at one instant; asking the database once per second for
        all of them keeps it off the critical path. The window covers everything since any
        held batch was prepared (lead + wake-up window), with a margin.
        """
        w = self.settings.wakeup
        with self._lock:
            now = self.clock()
            if self._changes_at is None or (now - self._changes_at).total_seconds() > CHANGES_TTL_S:
                back_ms = int((w.lead_seconds + w.window_seconds + 60) * 1000)
                self._changes = self.changed_since(ms_of(self.clock) - back_ms)
                self._changes_at = now
            return self._changes

    def changed_since(self, planned_ms: int) -> set[str]:
        """Users in the intent-change log since ``planned_ms`` (with the log's clock skew)."""
        return stored_intent.changed_in(self.stores.changes, instant_ms(planned_ms))

    def judge(
        self, w: WakeUp, items: list[Item], now: dt.datetime, changed: set[str], caps: bool = True
    ) -> tuple[list[End], list[Item]]:
        """``consumer.judge.judge`` with the category's grace; caps reserved only with ``caps``."""
        grace_s = self.settings.grace_seconds(w.category)
        return judge(self.stores, w.category, grace_s, items, now, changed, reserve_caps=caps)
