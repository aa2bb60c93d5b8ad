"""The in-memory twin of the registrations stores (``shared.store.abc_registrations``)."""

from __future__ import annotations

from shared.store.memory.base import Tables


class MemoryRegistrations:
    def __init__(self, tables: Tables) -> None:
        self.t = tables


class MemoryChanges:
    def __init__(self, tables: Tables) -> None:
        self.t = tables
