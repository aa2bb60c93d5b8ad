"""The one writer of users: a change of one user, or of many in a batch. A new time zone moves
every reminder of the user to a new version (``ReminderVersions``); other preferences are
rechecked at send time."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from creator.writers.base import Context, Done, Outcome, erased_meanwhile, guard
from creator.writers.versions import ReminderVersions, next_version
from shared.domain.localtime import parse_hhmm, validate_timezone
from shared.domain.messages import Doc
from shared.domain.plan import bucket_of
from shared.domain.validation import validate_daily_cap, validate_id
from shared.errors import ConflictError, InputError, NotFoundError, TzpushError
from shared.store.abc_accounts import UserUpsert

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UserChange:
    """A user change (``False``: leave as stored, ``None``: clear)."""

    user_id: str
    timezone: str | None = None
    enabled: bool | None = None
    categories: Mapping[str, bool] | None = None
    quiet_hours: tuple[str, str] | Literal[False] | None = False
    daily_cap: int | Literal[False] | None = False


class UserWriter:
    """Users, validated where they enter and planned at once after each change."""

    def __init__(self, ctx: Context, versions: ReminderVersions) -> None:
        self.ctx = ctx
        self.versions = versions

    def upsert(self, it: UserChange) -> Doc:
        """Create or change a user; returns the user as stored."""
        ctx = self.ctx
        validate_id(it.user_id, "user id")
        existing = ctx.stores.users.get(it.user_id)
        sets = self.sets(it, existing)
        # Only a change with a zone may create the user: one of some settings of a user erased
        # since the read above would create a user without one.
        update = user_update(it.user_id, sets)
        user = ctx.stores.users.upsert(it.user_id, update, create="timezone" in sets)
        if user is None:
            raise erased_meanwhile(it.user_id)
        written: dict[tuple[str, str], int] = {}
        zone = sets.get("timezone")
        if existing is not None and zone is not None and existing.get("timezone") != zone:
            written = self._move(it.user_id, existing, zone)
        ctx.stores.changes.record([it.user_id], ctx.now)
        ctx.planner.plan_users([it.user_id])
        self.versions.settle(written)
        return user

    def _move(self, user_id: str, existing: Doc, zone: str) -> dict[tuple[str, str], int]:
        """Every reminder of the user to a new version (its pending messages end); the
        versions written, by user and reminder id."""
        why = f"user time zone changed to {zone}"
        written, left = self.versions.supersede_all(
            self.ctx.stores.reminders.of_user(user_id), existing, why
        )
        for r in left:  # changed or re-created since read: one at a time, read again
            # The zone is written: a reminder that cannot be moved now must not stop the
            # others (a resend finds the zone unchanged and moves none). One erased since
            # has nothing to move; one other changes kept changing cancelled the old
            # version at the stored zone's instants each time, and the consumer cancels
            # what is left at send ("reminder changed").
            try:
                replaced = self.versions.supersede_current(r, existing, why)
                written[(user_id, str(r["_id"]))] = next_version(replaced)
            except (NotFoundError, ConflictError) as exc:
                log.warning("reminder %s not moved to the new zone: %s", r["_id"], exc)
        return written

    def sets(self, it: UserChange, existing: Doc | None) -> Doc:
        """The ``$set`` of a user change, every value checked (``InputError`` names the bad one)."""
        if existing is None and it.timezone is None:
            raise InputError(f"user {it.user_id!r} does not exist yet: --timezone is required")
        sets: dict[str, Any] = {"updatedAt": self.ctx.now}
        if it.timezone is not None:
            sets["timezone"] = validate_timezone(it.timezone)
        if it.enabled is not None:
            sets["prefs.enabled"] = it.enabled
        for cat, on in (it.categories or {}).items():
            self.ctx.check_category(cat)
            sets[f"prefs.categories.{cat}"] = bool(on)
        if it.quiet_hours is None:
            sets["prefs.quietHours"] = None
        elif it.quiet_hours is not False:
            start, end = (parse_hhmm(x).strftime("%H:%M") for x in it.quiet_hours)
            sets["prefs.quietHours"] = [start, end]
        if it.daily_cap is None:
            sets["dailyCap"] = None
        elif it.daily_cap is not False:
            sets["dailyCap"] = validate_daily_cap(it.daily_cap)
        return sets

    # -- many ------------------------------------------------------------------------------
    def apply_many(
        self,
        items: Sequence[tuple[int, UserChange]],
        users: Mapping[str, Doc],
        out: list[Outcome | None],
        to_plan: set[str],
        to_stamp: set[str],
    ) -> tuple[dict[str, int], list[tuple[int, str, Doc]]]:
        """Changed users in one bulk write; a new time zone for an existing user goes through
        ``upsert`` (its pending messages move). Returns the index of each user to create, and
        their documents (inserted last, by ``insert_many``)."""
        ops: list[UserUpsert] = []
        done: list[tuple[int, str]] = []
        fresh: list[tuple[int, str, Doc]] = []
        created: dict[str, int] = {}
        for i, it in items:
            existing = users.get(it.user_id)
            if existing is not None and it.timezone not in (None, existing.get("timezone")):
                out[i] = guard(self._changed, it)
                continue
            try:
                validate_id(it.user_id, "user id")
                sets = self.sets(it, existing)
            except TzpushError as exc:
                out[i] = exc
                continue
            if existing is None:
                created[it.user_id] = i
                fresh.append((i, it.user_id, _new_user(it.user_id, sets)))
            else:
                # Only with a zone may it create the user (erased since the read): ``upsert``.
                update = user_update(it.user_id, sets)
                ops.append(UserUpsert(it.user_id, update, "timezone" in sets))
                done.append((i, it.user_id))
        if ops:
            self._update_many(ops, done, out, to_plan, to_stamp)
        return created, fresh

    def _changed(self, it: UserChange) -> Done:
        return Done(self.upsert(it), "changed")

    def _update_many(
        self,
        ops: list[UserUpsert],
        done: list[tuple[int, str]],
        out: list[Outcome | None],
        to_plan: set[str],
        to_stamp: set[str],
    ) -> None:
        users = self.ctx.stores.users
        created = users.upsert_many(ops)  # erased since the read: made again
        stored = users.get_many([u for _, u in done])
        for i, uid in done:
            if uid not in stored:  # erased since the read, and not created again by the change
                out[i] = erased_meanwhile(uid)
                continue
            out[i] = Done(stored[uid], "created" if uid in created else "changed")
            to_plan.add(uid)
            to_stamp.add(uid)

    def insert_many(
        self,
        fresh: list[tuple[int, str, Doc]],
        out: list[Outcome | None],
        to_plan: set[str],
        to_stamp: set[str],
    ) -> dict[str, Doc]:
        """New users in one insert (cheaper than upserts here); one a concurrent call created
        meanwhile is updated instead, as ``upsert`` would. Returns those inserted."""
        if not fresh:
            return {}
        taken = self.ctx.stores.users.insert_many([doc for _, _, doc in fresh])
        inserted: dict[str, Doc] = {}
        ops: list[UserUpsert] = []
        done: list[tuple[int, str]] = []
        for k, (i, uid, doc) in enumerate(fresh):
            if k in taken:
                skip = ("_id", "createdAt", "bucket")
                sets = {key: value for key, value in _flat(doc).items() if key not in skip}
                ops.append(UserUpsert(uid, user_update(uid, sets), True))
                done.append((i, uid))
            else:
                out[i] = Done(doc, "created")
                to_plan.add(uid)
                inserted[uid] = doc
        if ops:
            self._update_many(ops, done, out, to_plan, to_stamp)
        return inserted


def user_update(user_id: str, sets: Doc) -> Doc:
    """The upsert of a user: the checked ``sets``, and what only a new user gets."""
    return {
        "$set": sets,
        "$setOnInsert": {"createdAt": sets["updatedAt"], "bucket": bucket_of(user_id)},
    }


def _new_user(user_id: str, sets: Doc) -> Doc:
    """The document ``user_update(user_id, sets)`` would create (dotted keys nested)."""
    doc: Doc = {"_id": user_id}
    update = user_update(user_id, sets)
    for key, value in {**update["$set"], **update["$setOnInsert"]}.items():
        *path, last = key.split(".")
        node = doc
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return doc


def _flat(doc: Doc, prefix: str = "") -> Doc:
    """Nested fields as dotted keys (the inverse of ``_new_user``'s nesting)."""
    out: Doc = {}
    for key, value in doc.items():
        if isinstance(value, dict) and key in ("prefs", "categories"):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
