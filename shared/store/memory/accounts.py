"""The in-memory twin of the creator's accounts stores (``shared.store.abc_accounts``)."""

from __future__ import annotations

from shared.store.memory.base import Tables


class MemoryUsers:
    def __init__(self, tables: Tables) -> None:
        self.t = tables


class MemoryReminders:
    def __init__(self, tables: Tables) -> None:
        self.t = tables


class MemoryErasure:
    def __init__(self, tables: Tables) -> None:
        self.t = tables
