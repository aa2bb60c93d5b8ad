"""The storage seam, registrations and the change log as management and planning use them.

Filled in by the registrations' move behind the seam (issue 31); ``shared.store.mongo
.registrations`` implements these on MongoDB and ``shared.store.memory.registrations`` in memory.
"""

from __future__ import annotations

from typing import Protocol


class RegistrationStore(Protocol):
    """Device registrations (``notification_tokens``): logins, handovers, logouts."""


class ChangeStore(Protocol):
    """The intent log as the creator writes and reads it (changed users, erasures, counters)."""
