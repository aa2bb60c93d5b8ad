"""The pending-ids cache on the memory twin, its ages measured by the injected clock."""

from __future__ import annotations

import datetime as dt

from consumer.pending import PendingCache
from shared.clock import FakeClock, ms_of
from shared.store.memory import Tables, memory_stores

T0 = dt.datetime(2026, 3, 2, 8, 0, tzinfo=dt.UTC)


def test_a_window_read_once_serves_wakeups_planned_before_it_until_it_is_a_minute_old():
    clock = FakeClock(T0)
    tables = Tables()
    tables.put(
        "messages",
        {"_id": "m1", "status": "pending", "isDeleted": False, "scheduledAt": T0},
    )
    cache = PendingCache(memory_stores(tables).messages, span_s=60, clock=clock)
    planned = ms_of(clock) - 10_000
    assert cache.pending(T0, T0, planned) == {"m1"} and cache.queries == 1
    tables.put(
        "messages", {"_id": "m2", "status": "pending", "isDeleted": False, "scheduledAt": T0}
    )
    assert cache.pending(T0, T0, planned) == {"m1"} and cache.queries == 1  # reused
    assert cache.pending(T0, T0, ms_of(clock)) == {"m1", "m2"}  # planned after the read
    assert cache.queries == 2
    clock.advance(60)
    assert cache.pending(T0, T0, planned) == {"m1", "m2"} and cache.queries == 3  # expired
