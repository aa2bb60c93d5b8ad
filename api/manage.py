"""The management code under the API: ``creator.manage.Manager`` plus what HTTP needs of it.

Everything that changes a user's intent goes through the Manager's own steps (the intent-change
stamp, cancelling what no longer holds, re-planning at once), so the API and the CLI have the
same semantics. The API adds:

- ``put_reminder``: a reminder under a client-chosen id, created or replaced. Replacing with the
  same content changes nothing (no new version, nothing cancelled), so a PUT sent twice is
  harmless. Reminder ids are global (the CLI's ids): a client id already used by another user
  is a conflict.
- ``patch_reminder``: the stored reminder with some fields changed, through ``put_reminder``.
- ``logout``: deactivates only this user's registration of the device, so a late logout of a
  previous user never logs out whoever holds the install now.
- ``erase_user``: the user's erasure (see its docstring and docs/api.md).

The first two use the Manager's field checks and ``_supersede`` (version bump and cancellation
of the old version's pending messages), exactly as ``update_reminder`` does.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pymongo.errors import DuplicateKeyError

from api.checks import payload_problem
from api.problems import ApiProblem, field_error, invalid
from creator.manage import Manager
from shared.domain.messages import Doc, Status, terminal_update
from shared.store import db as dbm
from shared.store import tokens
from shared.store.intent import record_changes

log = logging.getLogger(__name__)

REMINDER_FIELDS = ("category", "label", "time", "offsetMinutes", "weekdays", "title", "body")
ERASED = "user erased"


@dataclass(frozen=True)
class ReminderSpec:
    """A reminder's fields as the Manager takes them (weekdays 0 = Monday)."""

    category: str
    label: str
    at: str
    offset_minutes: int
    weekdays: Collection[int] | None
    title: str | None
    body: str | None
    data: Mapping[str, Any] | None
    active: bool


@dataclass(frozen=True)
class Erased:
    cancelled: int
    tokens: int
    reminders: int
    history: int


def new_reminder_id() -> str:
    return uuid.uuid4().hex[:16]


class ApiManager(Manager):
    """The Manager, with the operations the HTTP resources need."""

    def owned_reminder(self, user_id: str, reminder_id: str, *, deleted: bool = False) -> Doc:
        """The user's reminder, or 404 (another user's reminder is not visible here)."""
        doc = self.db[dbm.REMINDERS].find_one({"_id": reminder_id})
        if doc is None or doc.get("userId") != user_id or (doc.get("isDeleted") and not deleted):
            raise ApiProblem(404, f"no reminder {reminder_id!r} for user {user_id!r}")
        return doc

    def put_reminder(self, user_id: str, reminder_id: str, spec: ReminderSpec) -> tuple[Doc, bool]:
        """Create or replace; returns the stored reminder and whether it was created."""
        self.get_user(user_id)
        too_big = payload_problem(spec.title, spec.body, spec.data)
        if too_big is not None:
            name = "data" if spec.data else "body" if spec.body else "title"
            raise invalid([field_error(name, too_big)])
        fields = self._reminder_fields(
            spec.category,
            spec.label,
            spec.at,
            spec.offset_minutes,
            spec.weekdays,
            spec.title,
            spec.body,
            spec.data,
        )
        fields["active"] = spec.active
        coll = self.db[dbm.REMINDERS]
        existing = coll.find_one({"_id": reminder_id})
        if existing is None:
            now = self.now
            doc = {
                **fields,
                "_id": reminder_id,
                "userId": user_id,
                "isDeleted": False,
                "version": 1,
                "createdAt": now,
                "updatedAt": now,
            }
            try:
                coll.insert_one(doc)
            except DuplicateKeyError:  # a concurrent PUT of the same id won: replace it
                return self.put_reminder(user_id, reminder_id, spec)
            record_changes(self.db, [user_id], now)
            self.planner.plan_users([user_id])
            return doc, True
        if existing.get("userId") != user_id:
            raise ApiProblem(
                409,
                f"reminder id {reminder_id!r} is used by another user: reminder ids are global, "
                "choose another (a UUID, for example)",
            )
        revived = bool(existing.get("isDeleted"))
        same = not revived and all(existing.get(k) == v for k, v in fields.items())
        if same:
            return existing, False
        user = self.get_user(user_id)
        why = "reminder replaced" if not revived else "reminder re-created"
        self._supersede(existing, user, why, extra={**fields, "isDeleted": False})
        record_changes(self.db, [user_id], self.now)
        self.planner.plan_users([user_id])
        return self.owned_reminder(user_id, reminder_id), revived

    def patch_reminder(self, user_id: str, reminder_id: str, changes: Mapping[str, Any]) -> Doc:
        """Change some fields (keys as in ``ReminderSpec``); the rest stays as stored."""
        old = self.owned_reminder(user_id, reminder_id)
        current: dict[str, Any] = {
            "category": old.get("category"),
            "label": old.get("label"),
            "at": old.get("time"),
            "offset_minutes": old.get("offsetMinutes") or 0,
            "weekdays": old.get("weekdays"),
            "title": old.get("title"),
            "body": old.get("body"),
            "data": old.get("data"),
            "active": bool(old.get("active", True)),
        }
        current.update(changes)
        doc, _ = self.put_reminder(user_id, reminder_id, ReminderSpec(**current))
        return doc

    def delete_reminder(self, user_id: str, reminder_id: str) -> None:
        """Remove (the CLI's ``reminders remove``); removing a removed reminder is a no-op."""
        doc = self.owned_reminder(user_id, reminder_id, deleted=True)
        if not doc.get("isDeleted"):
            self.remove_reminder(reminder_id)

    def logout(self, user_id: str, device_id: str) -> int:
        """Deactivate this user's registration of the device (if it still has one)."""
        self.get_user(user_id)
        flt = {"userId": user_id, "deviceId": device_id}
        return len(tokens.deactivate(self.db, flt, "unregistered (logout)", self.now))

    def erase_user(self, user_id: str) -> Erased:
        """Erase a user: nothing more is sent to them, and nothing personal is left.

        In this order, so a consumer judging the user meanwhile finds them gone: stamp the
        change log (consumers recheck in full: "user no longer exists"), delete the user,
        deactivate then delete their device registrations, delete their reminders, end their
        pending and missed messages ``cancelled`` "user erased" (nothing pending stays, nothing
        missed can be replayed), delete their daily-cap counters. Message history is kept for
        the figures (counts by status and category, lateness) but anonymised: the user id
        becomes a random ``erased-...`` id (one per erasure, unlinkable), and the push's text,
        data, label, token and zone are removed. A push that was already leaving for Expo at
        that instant may still arrive.
        """
        self.get_user(user_id)
        now = self.now
        record_changes(self.db, [user_id], now)
        self.db[dbm.USERS].delete_one({"_id": user_id})
        off = tokens.deactivate(self.db, {"userId": user_id}, ERASED, now)
        self.db[dbm.TOKENS].delete_many({"userId": user_id})
        removed = self.db[dbm.REMINDERS].delete_many({"userId": user_id}).deleted_count
        messages = self.db[dbm.MESSAGES]
        cancelled = messages.update_many(
            {"userId": user_id, "status": {"$in": [Status.PENDING.value, Status.IS_MISSED.value]}},
            {"$set": terminal_update(Status.CANCELLED, ERASED, now)},
        ).modified_count
        pseudonym = "erased-" + uuid.uuid4().hex[:16]
        scrub = dict.fromkeys(("title", "body", "data", "label", "token", "timezone"), None)
        history = messages.update_many(
            {"userId": user_id}, {"$set": {**scrub, "userId": pseudonym, "erasedAt": now}}
        ).modified_count
        self.db[dbm.COUNTERS].delete_many({"_id": {"$regex": f"^{re.escape(user_id)}:"}})
        log.info(
            "user erased: %d pending cancelled, %d tokens off, %d reminders, %d messages kept "
            "anonymised",
            cancelled,
            len(off),
            removed,
            history,
            extra={"user_id": pseudonym},
        )
        return Erased(cancelled, len(off), removed, history)
