"""Upserts under ids the caller chose, one or many at once: ``creator.writers.batch`` and the
reminder writer's ``put``, under the names the API and the tests import."""

from __future__ import annotations

from typing import Any

from creator.writers import Writers
from creator.writers.base import Created, Done, Outcome
from creator.writers.batch import Item, apply, register_tokens
from creator.writers.logins import Login
from creator.writers.reminders import ReminderPut, ReminderSpec
from creator.writers.users import UserChange


def put_reminder(w: Writers, *args: Any, **kw: Any) -> Done:
    """``ReminderWriter.put`` (``user_id, reminder_id, spec, *, patch, born``)."""
    return w.reminders.put(*args, **kw)


__all__ = [
    "Created",
    "Done",
    "Item",
    "Login",
    "Outcome",
    "ReminderPut",
    "ReminderSpec",
    "UserChange",
    "apply",
    "put_reminder",
    "register_tokens",
]
