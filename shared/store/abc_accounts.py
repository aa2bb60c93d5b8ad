"""The storage seam, accounts: users, reminders and what erasure reads and removes.

``shared.store.mongo.accounts`` implements these on MongoDB and ``shared.store.memory.accounts``
in memory, with the same answers (``tests/contract/test_account_stores.py``). ``Doc`` dicts and
plain tuples cross the seam. A user update is written in MongoDB's update language, limited to
``$set`` (dotted names reach into sub-documents) and ``$setOnInsert``, which the twin applies
the same way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple, Protocol

from shared.domain.messages import Doc


class UserUpsert(NamedTuple):
    """One user upsert: ``update`` (``$set`` and ``$setOnInsert``) applied to ``user_id``;
    ``create``: the user is created (``$set`` and ``$setOnInsert`` both) when it does not
    exist, else the upsert changes nothing."""

    user_id: str
    update: Doc
    create: bool


class VersionCancel(NamedTuple):
    """The pending messages of ``reminder_id`` at ``instants`` planned from a version up to
    ``up_to`` (or with no version, or one that is not a number)."""

    reminder_id: str
    up_to: int
    instants: Sequence[dt.datetime]


class StaleVersions(NamedTuple):
    """The pending messages of ``user_id``'s reminder ``reminder_id`` due at or after ``since``
    planned from a version before ``version`` (or with no version, or one that is not a
    number)."""

    user_id: str
    reminder_id: str
    version: int
    since: dt.datetime


class UserStore(Protocol):
    """Users by id, as the management writers read and write them."""

    def get(self, user_id: str, fields: Collection[str] | None = None) -> Doc | None:
        """The stored user (only ``_id`` and ``fields`` when given), or None."""

    def get_many(self, user_ids: Collection[str]) -> dict[str, Doc]:
        """Those of these users that exist, by id."""

    def upsert(self, user_id: str, update: Doc, *, create: bool) -> Doc | None:
        """Apply ``update`` to the user (``create``: also when it does not exist); the user as
        stored then, or None (it does not exist)."""

    def upsert_many(self, upserts: Sequence[UserUpsert]) -> set[str]:
        """Apply these upserts (each of another user) in one unordered write; the ids it
        created."""

    def insert_many(self, docs: Sequence[Doc]) -> set[int]:
        """Insert new users (unordered); the positions of those refused (their id was taken,
        by a stored user or by an earlier document of ``docs``)."""

    def delete(self, user_id: str) -> None: ...


class ReminderStore(Protocol):
    """Reminders by id and by user, and their versions: every change is a compare-and-set on
    the ``version`` (1 when missing) and ``createdAt`` its writer read."""

    def get(self, reminder_id: str) -> Doc | None: ...

    def get_many(self, reminder_ids: Collection[str]) -> dict[str, Doc]:
        """Those of these reminders that exist, by id."""

    def of_user(self, user_id: str, *, include_deleted: bool = False) -> list[Doc]:
        """The user's reminders (removed ones too with ``include_deleted``), in no set order."""

    def count_of_user(self, user_id: str) -> int:
        """How many reminders the user has (removed ones not counted)."""

    def insert(self, doc: Doc) -> bool:
        """Insert a new reminder; False when its id is taken (a concurrent create won)."""

    def insert_many(self, docs: Sequence[Doc]) -> set[int]:
        """Insert new reminders (unordered); the positions of those refused (their id was
        taken)."""

    def compare_and_set(self, old: Doc, sets: Doc, now: dt.datetime) -> int | None:
        """Write ``sets`` (and ``updatedAt``) over the reminder if it is still the version
        ``old`` is (same version and ``createdAt``); the version becomes the next. Returns the
        new version, or None when another change got in (or the reminder is gone)."""

    def compare_and_set_many(self, olds: Sequence[Doc], now: dt.datetime) -> None:
        """``compare_and_set`` of each of ``olds`` with no other field, in one write. Which
        went through is read back with ``stamps``."""

    def stamps(self, reminder_ids: Collection[str]) -> dict[str, tuple[int, Any]]:
        """The stored (version, ``createdAt``) of each of these reminders that exists."""

    def cancel_at(self, cancels: Sequence[VersionCancel], reason: str, now: dt.datetime) -> int:
        """End ``cancelled`` with ``reason`` the pending, not deleted messages each cancel
        names, in one write; how many ended."""

    def cancel_versions_before(self, stale: StaleVersions, reason: str, now: dt.datetime) -> int:
        """End ``cancelled`` the not deleted messages ``stale`` names; how many ended."""

    def delete(self, user_ids: Collection[str], reminder_ids: Collection[str] | None = None) -> int:
        """Delete these users' reminders (only those of ``reminder_ids`` when given); how many."""


class ErasureStore(Protocol):
    """What an erasure does to a user's messages and Idempotency-Key records, and who holds a
    user id now (``shared.store.erasure`` has the rules over the answers)."""

    def scrub(
        self, user_id: str, now: dt.datetime, *, planned_before: dt.datetime | None = None
    ) -> tuple[int, int, str]:
        """End the user's pending and missed messages ``cancelled`` "user erased" and anonymise
        all of them (``erasure.anonymous``: one pseudonym for the sweep). ``planned_before``:
        only messages whose ``plannedAt`` is at or before it. Returns (ended, anonymised, the
        pseudonym)."""

    def scrub_ids(self, ids: Collection[str], now: dt.datetime) -> tuple[int, str]:
        """``scrub`` for these messages (by id, of one user): those still pending or missed end
        ``cancelled`` "user erased", all are anonymised. Returns (ended, the pseudonym)."""

    def incarnations(self, user_ids: Collection[str]) -> dict[str, Any]:
        """Those of these users that exist (string ids only), each with its ``createdAt``:
        which user holds the id now."""

    def planned_from(
        self, user_ids: Collection[str], field: str, values: Collection[Any]
    ) -> dict[str, list[Any]]:
        """The ids of these users' messages whose ``field`` (``notificationTokenId`` or
        ``reminderId``) is one of ``values``, by user."""

    def forget_requests(self, user_id: str) -> int:
        """Delete the user's Idempotency-Key records (their stored answers hold the user's
        labels and texts); how many."""
