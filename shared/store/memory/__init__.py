"""The in-memory twin of the storage seam (``shared.store.abc``): the MongoDB adapter's
semantics (unique refusals, compare-and-set) under one lock, for fast tests of the rules.
``tests/contract`` runs the same suite over both, so the twin cannot drift from the adapter."""

from __future__ import annotations

from shared.store.abc import ConsumerStores
from shared.store.abc_creator import CreatorStores
from shared.store.families import Parts, assemble
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

CONSUMER: Parts[Tables] = {
    "messages": MemoryMessages,
    "guards": MemoryGuards,
    "journal": MemoryJournal,
    "changes": MemoryIntentLog,
    "counters": MemoryCapCounters,
    "tokens": MemoryTokens,
    "current": MemoryCurrentIntent,
    "senders": MemorySenders,
}
"""The twin of each of the consumer's stores."""

CREATOR: Parts[Tables] = {
    "users": MemoryUsers,
    "reminders": MemoryReminders,
    "erasure": MemoryErasure,
    "registrations": MemoryRegistrations,
    "changes": MemoryChanges,
    "partitions": MemoryPartitions,
    "plans": MemoryPlans,
    "pending": lambda tables: MemoryPending(tables, memory_stores(tables)),
}
"""The twin of each of the creator's stores."""


def memory_stores(tables: Tables | None = None) -> ConsumerStores:
    """The consumer's stores over ``tables`` (new, empty ones by default)."""
    return assemble(ConsumerStores, tables or Tables(), CONSUMER)


def memory_creator_stores(tables: Tables | None = None) -> CreatorStores:
    """The creator's stores over ``tables`` (new, empty ones by default)."""
    return assemble(CreatorStores, tables or Tables(), CREATOR)


__all__ = ["Tables", "memory_creator_stores", "memory_stores"]
