"""Everything the creator (management and planning) needs of storage, one adapter family.

``shared.store.mongo.creator_stores`` builds it on MongoDB, ``shared.store.memory
.memory_creator_stores`` in memory; ``tests/contract`` runs one suite over both.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.store.abc_accounts import ErasureStore, ReminderStore, UserStore
from shared.store.abc_planning import PartitionStore, PendingStore, PlanStore
from shared.store.abc_registrations import ChangeStore, RegistrationStore


@dataclass(frozen=True)
class CreatorStores:
    """The creator's stores."""

    users: UserStore
    reminders: ReminderStore
    erasure: ErasureStore
    registrations: RegistrationStore
    changes: ChangeStore
    partitions: PartitionStore
    plans: PlanStore
    pending: PendingStore
