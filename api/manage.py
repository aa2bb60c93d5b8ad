"""The management code under the API: ``creator.manage.Manager`` plus what HTTP needs of it.

Everything that changes a user's intent goes through the writers of ``creator.writers`` (the
intent-change stamp, cancelling what no longer holds, re-planning at once), so the API, a batch
item and the CLI have the same semantics. The API adds:

- ``put_reminder``: a reminder under a client-chosen id, created or replaced
  (``ReminderWriter.put``, also what ``POST /v1/batch`` uses): the same content again changes
  nothing, so a PUT sent twice is harmless; an id another user holds is a conflict.
- ``patch_reminder``: the stored reminder with some fields changed, through ``put_reminder``.
- ``logout`` and ``erase_user``: the login and erasure writers (also ``tzpush tokens logout``
  and ``tzpush users erase``).

"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from api.checks import payload_problem
from api.problems import ApiProblem, field_error, invalid
from creator.manage import Manager
from creator.writers.erasure import Erased
from creator.writers.reminders import ReminderSpec, stored_content
from shared.domain.messages import Doc

log = logging.getLogger(__name__)

REMINDER_FIELDS = ("category", "label", "time", "offsetMinutes", "weekdays", "title", "body")


def new_reminder_id() -> str:
    return uuid.uuid4().hex[:16]


class ApiManager(Manager):
    """The Manager, with the operations the HTTP resources need."""

    def owned_reminder(self, user_id: str, reminder_id: str, *, deleted: bool = False) -> Doc:
        """The user's reminder, or 404 (another user's reminder is not visible here)."""
        doc = self.stores.reminders.get(reminder_id)
        if doc is None or doc.get("userId") != user_id or (doc.get("isDeleted") and not deleted):
            raise ApiProblem(404, f"no reminder {reminder_id!r} for user {user_id!r}")
        return doc

    def put_reminder(
        self,
        user_id: str,
        reminder_id: str,
        spec: ReminderSpec,
        *,
        patch: Callable[[Doc], ReminderSpec] | None = None,
    ) -> tuple[Doc, bool]:
        """Create or replace (``ReminderWriter.put``); returns the stored reminder and
        whether it was created. A payload over Expo's limit names its field."""
        too_big = payload_problem(spec.title, spec.body, spec.data)
        if too_big is not None:
            self.get_user(user_id)  # an unknown user is a 404 before a bad body is a 422
            name = "data" if spec.data else "body" if spec.body else "title"
            raise invalid([field_error(name, too_big)])
        done = self.reminders.put(user_id, reminder_id, spec, patch=patch)
        return done.doc, done.change == "created"

    def patch_reminder(self, user_id: str, reminder_id: str, changes: Mapping[str, Any]) -> Doc:
        """Change some fields (keys as in ``ReminderSpec``); the rest stays as stored, as it is
        when written: a change that gets in first keeps its own fields (``put_reminder``)."""

        def spec_of(old: Doc) -> ReminderSpec:
            return ReminderSpec(**{**stored_content(old), **changes})

        old = self.owned_reminder(user_id, reminder_id)
        doc, _ = self.put_reminder(user_id, reminder_id, spec_of(old), patch=spec_of)
        return doc

    def delete_reminder(self, user_id: str, reminder_id: str) -> None:
        """Remove (the CLI's ``reminders remove``); removing a removed reminder is a no-op."""
        doc = self.owned_reminder(user_id, reminder_id, deleted=True)
        if not doc.get("isDeleted"):
            self.remove_reminder(reminder_id)

    def logout(self, user_id: str, device_id: str) -> int:
        """``LoginWriter.logout``."""
        return self.logins.logout(user_id, device_id)

    def erase_user(self, user_id: str) -> Erased:
        """``ErasureWriter.erase`` (docs/api.md, "Erasure")."""
        return self.erasure.erase(user_id)
