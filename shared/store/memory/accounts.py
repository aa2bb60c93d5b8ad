"""The in-memory twin of the creator's accounts stores (``shared.store.abc_accounts``): the
semantics of ``shared.store.mongo.accounts``, MongoDB's matching rules included (``isDeleted:
false`` matches only ``False``; ``{$not: {$gt: n}}`` matches a missing value or one that is not
a number; ``createdAt: null`` matches a missing one)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Sequence
from typing import Any

from shared.domain.messages import Doc, Status, terminal_update
from shared.store.abc_accounts import StaleVersions, UserUpsert, VersionCancel
from shared.store.erasure import ERASED, anonymous
from shared.store.memory.base import Tables, dotted, out, set_fields

UPDATES = frozenset(("$set", "$setOnInsert"))  # the update operators a user upsert may use


class MemoryUsers:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def get(self, user_id: str, fields: Collection[str] | None = None) -> Doc | None:
        with self.t.lock:
            d = self.t.users.get(user_id)
            if d is None:
                return None
            return out(d) if fields is None else _project(d, fields)

    def get_many(self, user_ids: Collection[str]) -> dict[str, Doc]:
        with self.t.lock:
            return {u: out(d) for u in set(user_ids) if (d := self.t.users.get(u)) is not None}

    def upsert(self, user_id: str, update: Doc, *, create: bool) -> Doc | None:
        with self.t.lock:
            self._upsert(UserUpsert(user_id, update, create))
            return self.get(user_id)

    def upsert_many(self, upserts: Sequence[UserUpsert]) -> set[str]:
        with self.t.lock:
            return {u.user_id for u in upserts if self._upsert(u)}

    def _upsert(self, u: UserUpsert) -> bool:
        """Apply one upsert; whether it created the user."""
        unknown = set(u.update) - UPDATES
        if unknown:
            raise ValueError(f"a user upsert may use only $set and $setOnInsert, not {unknown}")
        d = self.t.users.get(u.user_id)
        if d is not None:
            set_fields(d, u.update.get("$set", {}))
            return False
        if not u.create:
            return False
        d = self.t.users[u.user_id] = {"_id": u.user_id}
        set_fields(d, u.update.get("$set", {}))
        set_fields(d, u.update.get("$setOnInsert", {}))
        return True

    def insert_many(self, docs: Sequence[Doc]) -> set[int]:
        return _insert_refused(self.t, self.t.users, docs)

    def delete(self, user_id: str) -> None:
        with self.t.lock:
            self.t.users.pop(user_id, None)


class MemoryReminders:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def get(self, reminder_id: str) -> Doc | None:
        return self.t.get("reminders", reminder_id)

    def get_many(self, reminder_ids: Collection[str]) -> dict[str, Doc]:
        with self.t.lock:
            found = ((r, self.t.reminders.get(r)) for r in set(reminder_ids))
            return {r: out(d) for r, d in found if d is not None}

    def of_user(self, user_id: str, *, include_deleted: bool = False) -> list[Doc]:
        with self.t.lock:
            return [
                out(d)
                for d in self.t.reminders.values()
                if d.get("userId") == user_id and (include_deleted or d.get("isDeleted") is False)
            ]

    def count_of_user(self, user_id: str) -> int:
        with self.t.lock:
            return sum(
                1
                for d in self.t.reminders.values()
                if d.get("userId") == user_id and d.get("isDeleted") is False
            )

    def insert(self, doc: Doc) -> bool:
        return not _insert_refused(self.t, self.t.reminders, [doc])

    def insert_many(self, docs: Sequence[Doc]) -> set[int]:
        return _insert_refused(self.t, self.t.reminders, docs)

    def compare_and_set(self, old: Doc, sets: Doc, now: dt.datetime) -> int | None:
        with self.t.lock:
            return self._compare_and_set(old, sets, now)

    def _compare_and_set(self, old: Doc, sets: Doc, now: dt.datetime) -> int | None:
        seen = int(old.get("version", 1))
        d = self.t.reminders.get(old["_id"])
        if d is None:
            return None
        if "version" not in old and "version" not in d:
            d["version"] = 1  # as the adapter's first write: version 1 as read everywhere
        if not _equal_number(d.get("version"), seen) or d.get("createdAt") != old.get("createdAt"):
            return None
        set_fields(d, {**sets, "updatedAt": now})
        d["version"] = d["version"] + 1
        return seen + 1

    def compare_and_set_many(self, olds: Sequence[Doc], now: dt.datetime) -> None:
        with self.t.lock:
            for o in olds:
                self._compare_and_set(o, {}, now)

    def stamps(self, reminder_ids: Collection[str]) -> dict[str, tuple[int, Any]]:
        with self.t.lock:
            found = ((r, self.t.reminders.get(r)) for r in set(reminder_ids))
            return {
                r: (int(d.get("version", 1)), d.get("createdAt")) for r, d in found if d is not None
            }

    def cancel_at(self, cancels: Sequence[VersionCancel], reason: str, now: dt.datetime) -> int:
        wanted = [(c.reminder_id, c.up_to, set(c.instants)) for c in cancels if c.instants]

        def match(d: Doc) -> bool:
            return any(
                d.get("reminderId") == rid
                and _in(d.get("scheduledAt"), instants)
                and not _above(d.get("reminderVersion"), up_to)
                for rid, up_to, instants in wanted
            )

        return self._cancel(match, reason, now) if wanted else 0

    def cancel_versions_before(self, stale: StaleVersions, reason: str, now: dt.datetime) -> int:
        return self._cancel(
            lambda d: (
                d.get("userId") == stale.user_id
                and d.get("reminderId") == stale.reminder_id
                and isinstance(at := d.get("scheduledAt"), dt.datetime)
                and at >= stale.since
                and not _at_least(d.get("reminderVersion"), stale.version)
            ),
            reason,
            now,
        )

    def _cancel(self, match: Callable[[Doc], bool], reason: str, now: dt.datetime) -> int:
        """End ``cancelled`` the pending, not deleted messages ``match`` picks; how many."""
        n = 0
        with self.t.lock:
            for d in self.t.messages.values():
                if (
                    d.get("status") == Status.PENDING.value
                    and d.get("isDeleted") is False
                    and match(d)
                ):
                    set_fields(d, terminal_update(Status.CANCELLED, reason, now))
                    n += 1
        return n

    def delete(self, user_ids: Collection[str], reminder_ids: Collection[str] | None = None) -> int:
        users, ids = set(user_ids), None if reminder_ids is None else set(reminder_ids)
        with self.t.lock:
            doomed = [
                r
                for r, d in self.t.reminders.items()
                if _in(d.get("userId"), users) and (ids is None or r in ids)
            ]
            for r in doomed:
                del self.t.reminders[r]
        return len(doomed)


class MemoryErasure:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def scrub(
        self, user_id: str, now: dt.datetime, *, planned_before: dt.datetime | None = None
    ) -> tuple[int, int, str]:
        with self.t.lock:
            mine = [
                d
                for d in self.t.messages.values()
                if d.get("userId") == user_id
                and (
                    planned_before is None
                    or (isinstance(p := d.get("plannedAt"), dt.datetime) and p <= planned_before)
                )
            ]
            ended = sum(_end_erased(d, now) for d in mine)
            pseudonym, blank = anonymous(now)
            for d in mine:
                set_fields(d, blank)
        return ended, len(mine), pseudonym

    def scrub_ids(self, ids: Collection[str], now: dt.datetime) -> tuple[int, str]:
        pseudonym, blank = anonymous(now)
        with self.t.lock:
            mine = [d for i in ids if (d := self.t.messages.get(i)) is not None]
            ended = sum(_end_erased(d, now) for d in mine)
            for d in mine:
                set_fields(d, blank)
        return ended, pseudonym

    def incarnations(self, user_ids: Collection[str]) -> dict[str, Any]:
        with self.t.lock:
            return {
                u: d.get("createdAt")
                for u in user_ids
                if isinstance(u, str) and (d := self.t.users.get(u)) is not None
            }

    def planned_from(
        self, user_ids: Collection[str], field: str, values: Collection[Any]
    ) -> dict[str, list[Any]]:
        users, wanted = set(user_ids), list(values)
        ids: dict[str, list[Any]] = {}
        with self.t.lock:
            for i, d in self.t.messages.items():
                if _in(d.get("userId"), users) and _in(dotted(d, field), wanted):
                    ids.setdefault(str(d["userId"]), []).append(i)
        return ids

    def forget_requests(self, user_id: str) -> int:
        with self.t.lock:
            doomed = [k for k, d in self.t.idempotency.items() if d.get("userId") == user_id]
            for k in doomed:
                del self.t.idempotency[k]
        return len(doomed)


def _insert_refused(t: Tables, table: dict[str, Doc], docs: Sequence[Doc]) -> set[int]:
    """Insert copies of ``docs`` into ``table`` (unordered, under the lock); the positions of
    those refused because their ``_id`` was taken (by a stored document or an earlier one)."""
    refused: set[int] = set()
    with t.lock:
        for k, doc in enumerate(docs):
            if doc["_id"] in table:
                refused.add(k)
            else:
                table[doc["_id"]] = out(doc)
    return refused


def _end_erased(d: Doc, now: dt.datetime) -> bool:
    """End ``d`` ``cancelled`` "user erased" if it is pending or missed; whether it ended."""
    if d.get("status") not in (Status.PENDING.value, Status.IS_MISSED.value):
        return False
    set_fields(d, terminal_update(Status.CANCELLED, ERASED, now))
    return True


def _project(d: Doc, fields: Collection[str]) -> Doc:
    """``_id`` and ``fields`` of ``d`` (a copy), as a MongoDB projection returns them."""
    kept: Doc = {"_id": d["_id"]}
    for name in fields:
        value = dotted(d, name)
        if value is not None or name in d:
            set_fields(kept, {name: value})
    return kept


def _number(value: object) -> float | None:
    """``value`` as MongoDB compares numbers (a bool is not one), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _equal_number(value: object, n: int) -> bool:
    v = _number(value)
    return v is not None and v == n


def _above(value: object, n: int) -> bool:
    """MongoDB's ``{$gt: n}``: false for a missing value or one that is not a number."""
    v = _number(value)
    return v is not None and v > n


def _at_least(value: object, n: int) -> bool:
    """MongoDB's ``{$gte: n}``: false for a missing value or one that is not a number."""
    v = _number(value)
    return v is not None and v >= n


def _in(value: object, values: Collection[Any]) -> bool:
    """MongoDB's ``{$in: values}`` on a plain value: equal to one of them (a bool is not a
    number; a list or sub-document, written by hand, matches none here)."""
    if isinstance(value, dict | list):
        return False
    return any(value == v and isinstance(value, bool) == isinstance(v, bool) for v in values)
