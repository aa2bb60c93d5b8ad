"""The in-memory twin of the creator's planning stores (``shared.store.abc_planning``)."""

from __future__ import annotations

from shared.store.memory.base import Tables


class MemoryPartitions:
    def __init__(self, tables: Tables) -> None:
        self.t = tables


class MemoryPlans:
    def __init__(self, tables: Tables) -> None:
        self.t = tables


class MemoryPending:
    def __init__(self, tables: Tables) -> None:
        self.t = tables
