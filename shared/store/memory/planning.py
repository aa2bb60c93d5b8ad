"""The in-memory twin of the creator's planning stores (``shared.store.abc_planning``), one
module per responsibility as on MongoDB: partitions and leases, what a planning reads and
inserts, pending messages."""

from __future__ import annotations

from shared.store.memory.partitions import MemoryPartitions
from shared.store.memory.pending import MemoryPending
from shared.store.memory.plans import MemoryPlans

__all__ = ["MemoryPartitions", "MemoryPending", "MemoryPlans"]
