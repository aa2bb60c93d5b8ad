"""What a planning reads and inserts, in memory: the semantics of ``shared.store.mongo.plans``,
with the unique indexes of ``notification_messages`` as ``shared/store/db.py`` declares them:
the ``_id``, and ``pending_occurrence_of_reminder`` (due instant, user, registration, reminder;
partial: pending and not deleted), so that an occurrence inserted twice is refused as on
MongoDB."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from shared.domain.messages import Doc, Status
from shared.domain.plan import BUCKETS
from shared.store.abc_planning import Window
from shared.store.memory.base import Tables, out

Key = tuple[Any, ...]
# The keys of ``pending_occurrence_of_reminder`` in ``shared.store.db.index_plan`` (a contract
# test holds the two equal).
PENDING_UNIQUE_KEYS = ("scheduledAt", "userId", "notificationTokenId", "reminderId")


def pending_key(doc: Doc) -> Key | None:
    """The key of ``doc`` in the partial unique index of pending occurrences, or None when the
    index leaves it out (not pending, or deleted). A missing field counts as null, as there."""
    if doc.get("status") != Status.PENDING.value or doc.get("isDeleted") is not False:
        return None
    return tuple(doc.get(f) for f in PENDING_UNIQUE_KEYS)


def _in_bucket(doc: Doc, lo: int, hi: int) -> bool:
    b = doc.get("bucket")
    return isinstance(b, int | float) and not isinstance(b, bool) and lo <= b < hi


def _live(reminder: Doc) -> bool:
    return reminder.get("active") is True and reminder.get("isDeleted") is False


def _planned_in(doc: Doc, window: Window) -> bool:
    """Due in ``[window.start, window.end)`` and planned at or before ``window.at``."""
    due, planned = doc.get("scheduledAt"), doc.get("plannedAt")
    return (
        isinstance(due, dt.datetime)
        and window.start <= due < window.end
        and isinstance(planned, dt.datetime)
        and planned <= window.at
    )


def _project(doc: Doc, fields: Iterable[str]) -> Doc:
    """The ``_id`` and those of ``fields`` the document has (a MongoDB projection)."""
    return out({k: doc[k] for k in ("_id", *fields) if k in doc})


class MemoryPlans:
    def __init__(self, tables: Tables) -> None:
        self.t = tables

    def _find(self, rows: dict[str, Doc], match: Callable[[Doc], bool]) -> list[Doc]:
        with self.t.lock:
            return [out(d) for d in rows.values() if match(d)]

    # -- what to plan from ---------------------------------------------------------------------
    def reminders_per_bucket(self) -> float:
        with self.t.lock:
            return len(self.t.reminders) / BUCKETS

    def read_buckets(
        self, lo: int, hi: int
    ) -> tuple[list[Doc], dict[str, Doc], dict[str, list[Doc]]]:
        with self.t.lock:
            reminders = self._find(self.t.reminders, lambda d: _in_bucket(d, lo, hi) and _live(d))
            users = {d["_id"]: d for d in self._find(self.t.users, lambda d: _in_bucket(d, lo, hi))}
            tokens = self._find(
                self.t.tokens, lambda d: _in_bucket(d, lo, hi) and d.get("isActive") is True
            )
        tokens_by_user: dict[str, list[Doc]] = defaultdict(list)
        for t in tokens:
            tokens_by_user[t["userId"]].append(t)
        return reminders, users, tokens_by_user

    def active_reminders_of(self, user_ids: Sequence[str]) -> list[Doc]:
        ids = set(user_ids)
        return self._find(self.t.reminders, lambda d: d.get("userId") in ids and _live(d))

    def users_by_id(self, ids: Collection[str]) -> dict[str, Doc]:
        with self.t.lock:
            return {i: out(d) for i in set(ids) if (d := self.t.users.get(i)) is not None}

    def active_tokens_of(self, user_ids: Collection[str]) -> dict[str, Doc]:
        ids = set(user_ids)
        found = self._find(
            self.t.tokens, lambda d: d.get("userId") in ids and d.get("isActive") is True
        )
        return {d["_id"]: d for d in found}

    def reminder_versions(self, ids: Sequence[str]) -> dict[str, Doc]:
        with self.t.lock:
            found = [d for i in set(ids) if (d := self.t.reminders.get(i)) is not None]
            return {d["_id"]: _project(d, ("version", "active", "isDeleted")) for d in found}

    # -- messages ------------------------------------------------------------------------------
    def insert_messages(self, docs: list[Doc], chunk: int) -> tuple[int, list[Doc]]:
        inserted = 0
        duplicates: list[Doc] = []
        with self.t.lock:
            rows = self.t.messages
            taken = {k for d in rows.values() if (k := pending_key(d)) is not None}
            for d in docs:
                key = pending_key(d)
                if d["_id"] in rows or (key is not None and key in taken):
                    duplicates.append(d)
                    continue
                rows[d["_id"]] = out(d)
                if key is not None:
                    taken.add(key)
                inserted += 1
        return inserted, duplicates

    def existing_ids(self, ids: Collection[str]) -> set[str]:
        with self.t.lock:
            return {i for i in ids if i in self.t.messages}

    def planned_in_window(self, user_ids: Sequence[str], window: Window) -> list[Doc]:
        ids = set(user_ids)
        with self.t.lock:
            return [
                _project(d, ("userId", "notificationTokenId"))
                for d in self.t.messages.values()
                if d.get("userId") in ids and _planned_in(d, window)
            ]

    def pending_for_tokens(
        self, user_ids: Sequence[str], token_ids: Iterable[Any], window: Window
    ) -> list[Doc]:
        ids, tokens = set(user_ids), set(token_ids)
        with self.t.lock:
            return [
                _project(d, ("notificationTokenId",))
                for d in self.t.messages.values()
                if d.get("userId") in ids
                and pending_key(d) is not None
                and d.get("notificationTokenId") in tokens
                and _planned_in(d, window)
            ]

    # -- registrations -------------------------------------------------------------------------
    def token_ids_of(self, user_ids: Sequence[str]) -> set[Any]:
        ids = set(user_ids)
        with self.t.lock:
            return {i for i, d in self.t.tokens.items() if d.get("userId") in ids}

    def inactive_tokens_of(self, user_ids: Sequence[str]) -> dict[Any, Doc]:
        ids = set(user_ids)
        with self.t.lock:
            return {
                i: _project(d, ("userId", "deactivationReason"))
                for i, d in self.t.tokens.items()
                if d.get("userId") in ids and d.get("isActive") is False
            }
