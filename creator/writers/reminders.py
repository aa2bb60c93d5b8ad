"""The one writer of reminders: create, replace (a PUT under a client id), patch, remove, one at
a time or many in a batch. Every change goes through ``ReminderVersions``."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from creator.writers.base import (
    UNREAD,
    Batch,
    Context,
    Done,
    check_same_user,
    erased_meanwhile,
    guard,
)
from creator.writers.erasure import ErasureWriter
from creator.writers.versions import (
    SUPERSEDE_TRIES,
    ReminderVersions,
    next_version,
    reminder_busy,
)
from shared.domain.localtime import parse_hhmm
from shared.domain.messages import Doc
from shared.domain.plan import bucket_of
from shared.domain.validation import validate_id, validate_label, validate_payload
from shared.domain.weekdays import parse_weekdays
from shared.errors import ConflictError, InputError, NotFoundError
from shared.store import erasure

# What a reminder change may name (``update``).
MERGED = frozenset(
    ("category", "label", "at", "offset_minutes", "weekdays", "title", "body", "data")
)


@dataclass(frozen=True)
class ReminderSpec:
    """A reminder's fields as the writer takes them (weekdays 0 = Monday)."""

    category: str
    label: str
    at: str
    offset_minutes: int = 0
    weekdays: str | Collection[int] | None = None
    title: str | None = None
    body: str | None = None
    data: Mapping[str, Any] | None = None
    active: bool = True


@dataclass(frozen=True)
class ReminderPut:
    user_id: str
    reminder_id: str
    spec: ReminderSpec


class ReminderWriter:
    """Reminders, validated where they enter and planned at once after each change."""

    def __init__(self, ctx: Context, versions: ReminderVersions, erased: ErasureWriter) -> None:
        self.ctx = ctx
        self.versions = versions
        self.erased = erased

    def fields(
        self,
        category: str,
        label: str,
        at: str,
        offset_minutes: int,
        weekdays: str | Collection[int] | None,
        title: str | None,
        body: str | None,
        data: Mapping[str, Any] | None,
    ) -> Doc:
        """A reminder's stored fields, every value checked (``InputError`` names the bad one)."""
        self.ctx.check_category(category)
        validate_label(label)
        t = parse_hhmm(at)
        if not isinstance(offset_minutes, int) or not -1440 <= offset_minutes <= 1440:
            raise InputError(f"offset {offset_minutes!r} minutes is outside -1440..1440")
        validate_payload(title, body, dict(data) if data is not None else None)
        return {
            "category": category,
            "label": label,
            "time": t.strftime("%H:%M"),
            "offsetMinutes": offset_minutes,
            "weekdays": parse_weekdays(weekdays),
            "title": title,
            "body": body,
            "data": dict(data) if data is not None else None,
        }

    def spec_fields(self, spec: ReminderSpec) -> Doc:
        fields = self.fields(
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
        return fields

    def get(self, reminder_id: str) -> Doc:
        """The stored reminder; ``NotFoundError`` when there is none."""
        validate_id(reminder_id, "reminder id")
        doc = self.ctx.stores.reminders.get(reminder_id)
        if doc is None:
            raise NotFoundError(f"no reminder {reminder_id!r}")
        return doc

    def of_user(self, user_id: str, *, include_deleted: bool = False) -> list[Doc]:
        docs = self.ctx.stores.reminders.of_user(
            validate_id(user_id, "user id"), include_deleted=include_deleted
        )
        return sorted(docs, key=lambda r: (r["time"], r["label"]))

    def add(self, user_id: str, spec: ReminderSpec) -> Doc:
        """A new reminder under a new id, planned; returns the stored document."""
        return self.put(user_id, uuid.uuid4().hex[:16], spec).doc

    def update(self, reminder_id: str, **changes: Any) -> Doc:
        """Change the fields given; the others are those of the version replaced, read again
        if another change got in first. The old version's pending messages are cancelled."""
        old = self.get(reminder_id)
        active = changes.pop("active", None)
        unknown = set(changes) - MERGED
        if unknown:
            raise InputError(f"unknown reminder field(s): {', '.join(sorted(unknown))}")

        def fields_of(old: Doc) -> Doc:
            merged = stored_content(old)
            del merged["active"]
            merged.update({k: v for k, v in changes.items() if v is not None or k == "weekdays"})
            fields = self.fields(**merged)
            if active is not None:
                fields["active"] = bool(active)
            return fields

        fields_of(old)  # a bad value is refused before anything is written
        user = self.ctx.get_user(old["userId"])
        replaced = self.versions.supersede_current(old, user, "reminder changed", fields_of)
        self._planned(old["userId"], reminder_id, next_version(replaced))
        return self.get(reminder_id)

    def remove(self, reminder_id: str) -> Doc:
        """Remove (its pending messages are cancelled, "reminder removed")."""
        old = self.get(reminder_id)
        user = self.ctx.stores.users.get(old["userId"]) or {"timezone": "UTC"}
        gone = {"isDeleted": True, "active": False}
        self.versions.supersede_current(old, user, "reminder removed", lambda _: gone)
        self.ctx.stores.changes.record([old["userId"]], self.ctx.now)
        return self.get(reminder_id)

    def _planned(self, user_id: str, reminder_id: str, version: int) -> Any:
        """Stamp the change log, plan the reminder, and settle it at ``version``."""
        self.ctx.stores.changes.record([user_id], self.ctx.now)
        report = self.ctx.planner.plan_users([user_id], reminders=[reminder_id])
        self.versions.settle({(user_id, reminder_id): version})
        return report

    def put(
        self,
        user_id: str,
        reminder_id: str,
        spec: ReminderSpec,
        *,
        patch: Callable[[Doc], ReminderSpec] | None = None,
        born: Any = UNREAD,
    ) -> Done:
        """Create or replace the reminder ``reminder_id`` of ``user_id``, and plan it at once.

        The same content again changes nothing. Reminder ids are global: an id another user
        holds is a ``ConflictError``. A change that gets in between this one's read and its
        write makes this one start over from what is there then; a ``ConflictError`` after
        ``SUPERSEDE_TRIES`` such races. ``patch``: the content is ``patch(stored)`` of the
        reminder as read each time. ``born``: the user's ``createdAt`` as the caller read it
        first (a batch); another user found under the id now is a 404."""
        first = user = self.ctx.get_user(user_id)
        check_same_user(first, born)
        validate_id(reminder_id, "reminder id")
        fields = self.spec_fields(spec)
        for attempt in range(SUPERSEDE_TRIES):
            if attempt:  # erased meanwhile: a 404, not the reminder written again with its text
                user = self.ctx.get_user(user_id)
                check_same_user(user, first.get("createdAt"))
            done = self._put_once(user, user_id, reminder_id, fields, patch)
            if done is not None:
                return done
        raise reminder_busy(reminder_id)

    def _put_once(
        self,
        user: Doc,
        user_id: str,
        reminder_id: str,
        fields: Doc,
        patch: Callable[[Doc], ReminderSpec] | None,
    ) -> Done | None:
        """``put`` from the reminder as read now; None when another change got in first."""
        store = self.ctx.stores.reminders
        existing = store.get(reminder_id)
        if patch is not None:  # a PATCH neither creates nor revives: removed meanwhile is a 404
            if existing is None or existing.get("isDeleted") or existing.get("userId") != user_id:
                raise NotFoundError(f"no reminder {reminder_id!r} for user {user_id!r}")
            fields = self.spec_fields(patch(existing))
        if existing is None:
            self._room(user_id, store.count_of_user(user_id), 1)
            doc = new_reminder(user_id, reminder_id, fields, self.ctx.now)
            if not store.insert(doc):  # a concurrent PUT of the same id won
                return None
            report = self._planned(user_id, reminder_id, 1)
            read = erasure.incarnations_of({user_id: user})
            if self.erased.undo_if_erased(report, read=read, reminders={user_id: [reminder_id]}):
                raise erased_meanwhile(user_id)
            return Done(doc, "created")
        _check_owner(existing, user_id, reminder_id)
        revived = bool(existing.get("isDeleted"))
        if not revived and _same(existing, fields):
            # Maybe stored by an attempt an outage cut before its planning: plan it now.
            self.ctx.planner.plan_users([user_id], reminders=[reminder_id])
            return Done(existing, "unchanged")
        why = "reminder replaced" if not revived else "reminder re-created"
        if not self.versions.supersede(existing, user, why, {**fields, "isDeleted": False}):
            return None
        self._planned(user_id, reminder_id, next_version(existing))
        stored = store.get(reminder_id)
        # Erased since the write, perhaps created again and the id put by the new person:
        # nothing of this change is left to answer with.
        if (
            stored is None
            or stored.get("userId") != user_id
            or stored.get("createdAt") != existing.get("createdAt")
        ):
            raise erased_meanwhile(user_id)
        return Done(stored, "created" if revived else "changed")

    def put_many(self, items: Iterable[tuple[int, ReminderPut]], batch: Batch) -> None:
        """A batch's reminders: new ones in one insert (planned by the batch, ``to_plan``);
        changed or re-created ones, and those a concurrent PUT took, through ``put`` (``later``).
        """
        todo = batch.checked(items, self._checked_fields)
        if not todo:
            return
        stored = self.ctx.stores.reminders.get_many([it.reminder_id for _, it, _ in todo])
        now = self.ctx.now
        new: list[tuple[int, ReminderPut, Doc]] = []
        for i, it, fields in todo:
            existing = stored.get(it.reminder_id)
            if existing is None:
                new.append((i, it, new_reminder(it.user_id, it.reminder_id, fields, now)))
            elif existing.get("userId") != it.user_id:
                batch.out[i] = guard(_check_owner, existing, it.user_id, it.reminder_id)
            elif not existing.get("isDeleted") and _same(existing, fields):
                batch.out[i] = Done(existing, "unchanged")
            else:  # a changed or re-created reminder: its old version's pending messages end
                batch.later.append((i, self.put, (it.user_id, it.reminder_id, it.spec)))
        new = self._within_limit(new, batch)
        if not new:
            return
        lost = self.ctx.stores.reminders.insert_many([doc for _, _, doc in new])
        for k, (i, it, doc) in enumerate(new):
            if k in lost:  # a concurrent PUT of the id won
                batch.later.append((i, self.put, (it.user_id, it.reminder_id, it.spec)))
            else:
                batch.out[i] = Done(doc, "created")
                batch.to_plan.add(it.user_id)

    def _room(self, user_id: str, has: int, adding: int) -> None:
        """A ``ConflictError`` when ``adding`` new reminders to the ``has`` of the user would pass
        ``max_reminders_per_user``. Checked before each new reminder: concurrent creations may
        pass it by a few, never by a request's worth."""
        limit = self.ctx.settings.creator.max_reminders_per_user
        if has + adding > limit:
            raise ConflictError(
                f"user {user_id!r} has {has} reminders, and {limit} is the most one user may have "
                "(TZPUSH_CREATOR__MAX_REMINDERS_PER_USER): remove some first"
            )

    def _within_limit(
        self, new: list[tuple[int, ReminderPut, Doc]], batch: Batch
    ) -> list[tuple[int, ReminderPut, Doc]]:
        """The batch's new reminders that fit under each user's limit (one count a user); the
        others are answered with the refusal."""
        has: dict[str, int] = {}
        kept = []
        for i, it, doc in new:
            if it.user_id not in has:
                has[it.user_id] = self.ctx.stores.reminders.count_of_user(it.user_id)
            try:
                self._room(it.user_id, has[it.user_id], 1)
            except ConflictError as exc:
                batch.out[i] = exc
                continue
            has[it.user_id] += 1
            kept.append((i, it, doc))
        return kept

    def _checked_fields(self, it: ReminderPut) -> Doc:
        """The item's stored fields, its user and reminder ids checked."""
        validate_id(it.user_id, "user id")
        validate_id(it.reminder_id, "reminder id")
        return self.spec_fields(it.spec)


def stored_content(old: Mapping[str, Any]) -> dict[str, Any]:
    """A stored reminder's content, keyed as ``ReminderWriter.fields`` takes it, and whether
    it is active: what a change merges its own fields into. A field missing from a document
    written by hand is None, which ``fields`` refuses naming it (not a ``KeyError``)."""
    return {
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


def new_reminder(user_id: str, reminder_id: str, fields: Doc, now: dt.datetime) -> Doc:
    """A reminder document as first stored (``fields`` from ``ReminderWriter.fields``)."""
    return {
        "active": True,
        **fields,
        "_id": reminder_id,
        "userId": user_id,
        "bucket": bucket_of(user_id),  # the planner reads a range of buckets at a time
        "isDeleted": False,
        "version": 1,
        "createdAt": now,
        "updatedAt": now,
    }


def _same(existing: Doc, fields: Doc) -> bool:
    return all(existing.get(k) == v for k, v in fields.items())


def _check_owner(existing: Doc, user_id: str, reminder_id: str) -> Done:
    if existing.get("userId") != user_id:
        raise ConflictError(
            f"reminder id {reminder_id!r} is used by another user: reminder ids are global, "
            "choose another (a UUID, for example)"
        )
    return Done(existing, "unchanged")
