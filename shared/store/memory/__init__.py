"""The in-memory twin of the storage seam (``shared.store.abc``): the MongoDB adapter's
semantics (unique refusals, compare-and-set) under one lock, for fast tests of the rules.
``tests/contract`` runs the same suite over both, so the twin cannot drift from the adapter."""

from __future__ import annotations

from shared.store.abc import ConsumerStores
from shared.store.abc_creator import CreatorStores
from shared.store.memory.accounts import MemoryErasure, MemoryReminders, MemoryUsers
from shared.store.memory.base import Tables
from shared.store.memory.fleet import MemorySenders
from shared.store.memory.guards import MemoryGuards
from shared.store.memory.intent import MemoryCapCounters, MemoryCurrentIntent, MemoryIntentLog
from shared.store.memory.journal import MemoryJournal
from shared.store.memory.messages import MemoryMessages
from shared.store.memory.planning import MemoryPartitions, MemoryPending, MemoryPlans
from shared.store.memory.registrations import MemoryChanges, MemoryRegistrations
from shared.store.memory.tokens import MemoryTokens


def memory_stores(tables: Tables | None = None) -> ConsumerStores:
    """The consumer's stores over ``tables`` (new, empty ones by default)."""
    t = tables or Tables()
    return ConsumerStores(
        messages=MemoryMessages(t),
        guards=MemoryGuards(t),
        journal=MemoryJournal(t),
        changes=MemoryIntentLog(t),
        counters=MemoryCapCounters(t),
        tokens=MemoryTokens(t),
        current=MemoryCurrentIntent(t),
        senders=MemorySenders(t),
    )


def memory_creator_stores(tables: Tables | None = None) -> CreatorStores:
    """The creator's stores over ``tables`` (new, empty ones by default)."""
    t = tables or Tables()
    return CreatorStores(
        users=MemoryUsers(t),
        reminders=MemoryReminders(t),
        erasure=MemoryErasure(t),
        registrations=MemoryRegistrations(t),
        changes=MemoryChanges(t),
        partitions=MemoryPartitions(t),
        plans=MemoryPlans(t),
        pending=MemoryPending(t, memory_stores(t)),
    )


__all__ = ["Tables", "memory_creator_stores", "memory_stores"]
