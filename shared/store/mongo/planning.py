"""The MongoDB adapter of the creator's planning stores (``shared.store.abc_planning``), one
module per responsibility: partitions and leases, what a planning reads and inserts, pending
messages."""

from __future__ import annotations

from shared.store.mongo.partitions import MongoPartitions
from shared.store.mongo.pending import MongoPending
from shared.store.mongo.plans import MongoPlans

__all__ = ["MongoPartitions", "MongoPending", "MongoPlans"]
