"""The storage seam, registrations and the change log as management and planning use them.

``shared.store.mongo.registrations`` implements these on MongoDB and
``shared.store.memory.registrations`` in memory; ``tests/contract/test_registration_stores.py``
pins both. The rules over them (who is stamped when a registration is turned off, the clock skew
allowed when reading the log) live in ``shared.store.tokens`` and ``shared.store.intent``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Protocol

from shared.domain.messages import Doc
from shared.store.abc import IntentLog


class RegistrationStore(Protocol):
    """Device registrations (``notification_tokens``): logins, handovers, logouts, erasure.

    At most one active registration holds a device id, and at most one a token string (when it
    is a string): an insert that would make a second is refused. Every ``deactivate*`` turns off
    only registrations still active, each by a compare-and-set on ``isActive`` (setting
    ``deactivatedAt``, ``deactivationReason``, ``updatedAt``), and returns those this call
    turned off as ``{_id, userId}`` (``userId`` when the document has one); the caller stamps
    their users in the change log (``shared.store.tokens.stamped``)."""

    def active_for(self, device: str, token: str) -> list[Doc]:
        """The active registrations of this device id or of this token string, each once."""

    def active_holding(self, devices: Collection[str], strings: Collection[str]) -> list[Doc]:
        """The active registrations of any of these device ids or token strings, each once."""

    def of_user(self, user_id: str) -> list[Doc]:
        """The user's registrations, active or not, oldest (``createdAt``) first."""

    def insert(self, doc: Doc) -> bool:
        """Insert a new registration; False when refused (its ``_id`` exists, or its device id
        or token string is held by an active registration: a concurrent login won)."""

    def insert_many(self, docs: Sequence[Doc]) -> set[int]:
        """Insert new registrations, each on its own (one refused stops none of the others);
        the positions of those refused, as ``insert`` would refuse them in this order."""

    def deactivate(self, token_ids: Collection[str], reason: str, now: dt.datetime) -> list[Doc]:
        """Turn off the active ones among ``token_ids`` (a login's handover)."""

    def deactivate_holding(
        self, reason: str, now: dt.datetime, *, token: str | None, device: str | None
    ) -> list[Doc]:
        """Turn off every registration of this token string and this device id (``None``: not
        a condition; at least one is given): unregistering an install."""

    def deactivate_login(
        self, user_id: str, device: str, reason: str, now: dt.datetime
    ) -> list[Doc]:
        """Turn off this user's registrations of this device id, no one else's (a logout)."""

    def deactivate_of_user(self, user_id: str, reason: str, now: dt.datetime) -> list[Doc]:
        """Turn off every registration of the user (an erasure)."""

    def deactivate_ids_of(
        self, token_ids: Collection[str], user_ids: Collection[str], reason: str, now: dt.datetime
    ) -> list[Doc]:
        """Turn off those of ``token_ids`` that belong to one of ``user_ids`` (what a change
        created for users erased meanwhile)."""

    def delete_of_user(self, user_id: str) -> int:
        """Delete every registration of the user (turned off first); how many."""

    def delete_ids_of(self, token_ids: Collection[str], user_ids: Collection[str]) -> int:
        """Delete those of ``token_ids`` that belong to one of ``user_ids``; how many."""


class ChangeStore(IntentLog, Protocol):
    """The intent-change log as the creator writes and reads it (``record``: stamp users so
    consumers recheck them in full; ``changed_since``), with the erasure stamps and the daily-cap
    counters an erasure removes."""

    def erased_since(self, user_ids: Collection[str], since: dt.datetime) -> set[str]:
        """Which of ``user_ids`` were stamped erased at or after ``since`` (the caller allows
        for clock skew), whether or not a user exists again under the id."""

    def erase_counters(self, user_id: str) -> int:
        """Delete the user's daily-cap counters, those written before counters carried their
        user (their ``_id`` is ``user:local date``) included; how many."""
