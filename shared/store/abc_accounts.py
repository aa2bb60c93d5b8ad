"""The storage seam, accounts: users, reminders and what erasure reads and removes.

Filled in by the accounts' move behind the seam (issue 31); ``shared.store.mongo.accounts``
implements these on MongoDB and ``shared.store.memory.accounts`` in memory.
"""

from __future__ import annotations

from typing import Protocol


class UserStore(Protocol):
    """Users by id."""


class ReminderStore(Protocol):
    """Reminders by id and by user, with their versions."""


class ErasureStore(Protocol):
    """What an erasure reads (incarnations, missing users) and scrubs."""
