"""The storage seam, planning: partitions and their leases, what a pass reads and inserts,
pending messages.

Filled in by the planner's move behind the seam (issue 31); ``shared.store.mongo.planning``
implements these on MongoDB and ``shared.store.memory.planning`` in memory.
"""

from __future__ import annotations

from typing import Protocol


class PartitionStore(Protocol):
    """Partition documents: leases, watermarks, buckets."""


class PlanStore(Protocol):
    """What a planning pass reads (buckets, reminders, users, tokens) and inserts (messages)."""


class PendingStore(Protocol):
    """Pending messages as the planner's repairs and re-arming read and end them."""
