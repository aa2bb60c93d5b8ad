"""``Manager``: the management calls behind ``tzpush users|reminders|tokens`` (and the API's
``ApiManager``), each one call of the writers in ``creator.writers``, so the CLI, a single API
call and a batch item share one write path."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from creator.writers import Writers
from creator.writers.base import UNREAD, check_same_user, erased_meanwhile
from creator.writers.reminders import ReminderSpec, new_reminder, stored_content
from creator.writers.users import UserChange, user_update
from creator.writers.versions import SUPERSEDE_TRIES, next_version, reminder_busy
from shared.domain.messages import Doc
from shared.domain.weekdays import WEEKDAYS, parse_weekdays


class Manager(Writers):
    """The management API behind ``tzpush users|reminders|tokens``."""

    # -- users -----------------------------------------------------------------------------
    def upsert_user(
        self,
        user_id: str,
        *,
        timezone: str | None = None,
        enabled: bool | None = None,
        categories: Mapping[str, bool] | None = None,
        quiet_hours: tuple[str, str] | bool | None = False,
        daily_cap: int | bool | None = False,
    ) -> Doc:
        """Create or change a user. ``quiet_hours``/``daily_cap``: False = leave, None = clear."""
        return self.users.upsert(
            _user_change(user_id, timezone, enabled, categories, quiet_hours, daily_cap)
        )

    # -- reminders -------------------------------------------------------------------------
    def add_reminder(
        self,
        user_id: str,
        *,
        category: str,
        label: str,
        at: str,
        offset_minutes: int = 0,
        weekdays: str | Collection[int] | None = None,
        title: str | None = None,
        body: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> Doc:
        """Add a reminder and plan it; returns the stored document (its ``_id`` is the new id)."""
        spec = ReminderSpec(category, label, at, offset_minutes, weekdays, title, body, data)
        return self.reminders.add(user_id, spec)

    def list_reminders(self, user_id: str, *, include_deleted: bool = False) -> list[Doc]:
        return self.reminders.of_user(user_id, include_deleted=include_deleted)

    def update_reminder(self, reminder_id: str, **changes: Any) -> Doc:
        """Change a reminder: the old version's pending messages are cancelled, new ones planned."""
        return self.reminders.update(reminder_id, **changes)

    def remove_reminder(self, reminder_id: str) -> Doc:
        return self.reminders.remove(reminder_id)

    # -- tokens ----------------------------------------------------------------------------
    def register_token(
        self, user_id: str, *, device: str, token: str, max_attempts: int = 8, born: Any = UNREAD
    ) -> Doc:
        """A login (``LoginWriter.register``)."""
        return self.logins.register(
            user_id, device=device, token=token, max_attempts=max_attempts, born=born
        )

    def unregister_token(self, *, token: str | None = None, device: str | None = None) -> int:
        return self.logins.unregister(token=token, device=device)

    def list_tokens(self, user_id: str) -> list[Doc]:
        return self.logins.of_user(user_id)


def _user_change(
    user_id: str,
    timezone: str | None,
    enabled: bool | None,
    categories: Mapping[str, bool] | None,
    quiet_hours: Any,
    daily_cap: Any,
) -> UserChange:
    return UserChange(user_id, timezone, enabled, categories, quiet_hours, daily_cap)


__all__ = [
    "SUPERSEDE_TRIES",
    "UNREAD",
    "WEEKDAYS",
    "Manager",
    "check_same_user",
    "erased_meanwhile",
    "new_reminder",
    "next_version",
    "parse_weekdays",
    "reminder_busy",
    "stored_content",
    "user_update",
]
