"""The storage seam, planning: partitions and their leases, what a pass reads and inserts,
pending messages.

``shared.store.mongo.planning`` implements these on MongoDB and ``shared.store.memory.planning``
in memory; ``tests/contract/test_planning_stores.py`` pins both. Plain values, ``Doc`` dicts
and the records of ``shared.store.abc`` cross the seam, never a driver type.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from shared.domain.messages import Doc
from shared.store.abc import ConsumerStores, Ending, Guard


@dataclass(frozen=True, slots=True)
class Window:
    """A window a planning has in progress on a partition: ``[start, end)``, begun ``at``
    (the partition's ``inProgress``: ``from``, ``to``, ``at``)."""

    start: dt.datetime
    end: dt.datetime
    at: dt.datetime


class PartitionStore(Protocol):
    """Partition documents (``shared/store/partitions.py`` has their rule): leases, watermarks,
    windows in progress; the live creators; the buckets of users, reminders and tokens."""

    def backfill_buckets(self) -> int:
        """Give every user, reminder and token without a ``bucket`` the bucket of its user id
        (``shared.domain.plan.bucket_of``); how many were given one. A document whose user id
        is not a string gets none."""

    def ensure(self, partitions: int) -> dict[int, Doc]:
        """The documents of all ``partitions`` partitions by number, created on first use (a
        concurrent creation of the same ones is not an error), each new one seeded by
        ``partitions.seed`` from the documents of other counts and the legacy watermark."""

    def begin(self, pid: str, owner: str, window: Window) -> bool:
        """Mark ``window`` in progress on partition ``pid`` if ``owner`` holds it (the earliest
        ``inProgress.at`` kept; an ``inProgress`` that is not a document replaced); whether it
        was ``owner``'s."""

    def reopen(self, user_ids: Iterable[str], partitions: int, window: Window) -> None:
        """Widen (never narrow) the window in progress of these users' partitions to cover
        ``window`` (the earliest ``at`` kept), whoever holds them."""

    def in_progress_since(self, pids: Iterable[str]) -> dt.datetime | None:
        """The earliest ``inProgress.at`` of these partitions (None: none in progress)."""

    def finish(self, pid: str, owner: str, end: dt.datetime) -> bool:
        """Move the watermark up to ``end`` (never down) and clear the window if ``owner``
        holds ``pid``; whether it was ``owner``'s."""

    def watermarks(
        self, user_ids: Iterable[str], partitions: int, *, reach: bool = False
    ) -> dict[str, dt.datetime | None]:
        """Each user's partition watermark (``partitions.mark``; the legacy watermark while the
        partition documents do not exist yet); ``reach``: the end of a window in progress when
        it lies beyond."""

    def heartbeat(self, creator: str, now: dt.datetime, fields: Doc) -> None:
        """Set the creator's ``heartbeatAt`` to ``now`` and ``fields``; ``startedAt`` when new."""

    def live_since(self, since: dt.datetime) -> list[str]:
        """The creators whose heartbeat is at or after ``since``, sorted."""

    def forget(self, creator: str) -> None:
        """Remove the creator from the live set."""

    def take(
        self, creator: str, pids: Collection[str], until: dt.datetime, now: dt.datetime
    ) -> None:
        """Lease these partitions to ``creator`` until ``until`` where free, already its own or
        expired (``leaseUntil`` before ``now``)."""

    def held(self, creator: str, partitions: int) -> set[int]:
        """The numbers of the partitions of this count ``creator`` holds."""

    def release(self, creator: str, pids: Collection[str] | None = None) -> None:
        """Give back ``creator``'s leases of ``pids`` (None: of every partition, any count)."""


class PlanStore(Protocol):
    """What a planning reads (users, reminders, registrations), inserts (messages) and what its
    repairs read. Each read is one index range or one lookup on MongoDB."""

    def reminders_per_bucket(self) -> float:
        """The estimated number of reminders in one bucket (0 when there are none)."""

    def read_buckets(
        self, lo: int, hi: int
    ) -> tuple[list[Doc], dict[str, Doc], dict[str, list[Doc]]]:
        """The active, not deleted reminders, the users (by id) and the active tokens (by user
        id) of buckets ``[lo, hi)``, whole documents."""

    def active_reminders_of(self, user_ids: Sequence[str]) -> list[Doc]:
        """The active, not deleted reminders of these users."""

    def users_by_id(self, ids: Collection[str]) -> dict[str, Doc]:
        """The users of these ids that exist, by id."""

    def active_tokens_of(self, user_ids: Collection[str]) -> dict[str, Doc]:
        """The active registrations of these users, by their ``_id``."""

    def reminder_versions(self, ids: Sequence[str]) -> dict[str, Doc]:
        """Of these reminders, those that exist, by id: ``version``, ``active`` and
        ``isDeleted`` only (those they have)."""

    def insert_messages(self, docs: list[Doc], chunk: int) -> tuple[int, list[Doc]]:
        """Insert ``docs``, unordered, ``chunk`` at a time; how many went in, and the documents
        refused as duplicates: of an ``_id``, or of a pending occurrence (the partial unique
        index ``pending_occurrence_of_reminder``: due instant, user, registration, reminder
        among pending, not deleted messages). Any other write error is raised."""

    def existing_ids(self, ids: Collection[str]) -> set[str]:
        """Which of these message ids exist."""

    def planned_in_window(self, user_ids: Sequence[str], window: Window) -> list[Doc]:
        """The messages of these users due in ``[window.start, window.end)`` and planned at or
        before ``window.at``, whatever their status: ``userId`` and ``notificationTokenId``."""

    def pending_for_tokens(
        self, user_ids: Sequence[str], token_ids: Iterable[Any], window: Window
    ) -> list[Doc]:
        """The pending, not deleted messages of these users for these registrations, due in
        ``[window.start, window.end)`` and planned at or before ``window.at``:
        ``notificationTokenId``."""

    def token_ids_of(self, user_ids: Sequence[str]) -> set[Any]:
        """The ids of every registration of these users, active or not."""

    def inactive_tokens_of(self, user_ids: Sequence[str]) -> dict[Any, Doc]:
        """The registrations of these users turned off, by id: ``userId`` and
        ``deactivationReason``."""


class PendingStore(Protocol):
    """Pending messages by due instant as re-arming and the janitor read and end them."""

    @property
    def name(self) -> str:
        """The name of the data these stores are on (the database's): the same in every
        process that shares it."""

    @property
    def consumer(self) -> ConsumerStores:
        """The consumer's stores on the same data: the janitor takes send guards and merges a
        stopped consumer's journal through them, as a consumer does."""

    def due(self, start: dt.datetime, end: dt.datetime, batch: int) -> Generator[Doc, None, None]:
        """The pending, not deleted messages due in ``[start, end)`` in due order, read
        ``batch`` at a time; a generator: close it when not read to the end."""

    def due_fields(
        self, start: dt.datetime, end: dt.datetime, fields: Sequence[str]
    ) -> Generator[Doc, None, None]:
        """The same messages with these fields (and ``_id``) only, in no particular order; a
        generator: close it when not read to the end."""

    def count_due(self, start: dt.datetime, end: dt.datetime) -> int:
        """How many pending, not deleted messages are due in ``[start, end)``."""

    def guards_on(self, ids: Collection[str]) -> list[Guard]:
        """The send guards held on these message ids (``id``, ``owner``, ``at``)."""

    def end(self, endings: Sequence[Ending]) -> int:
        """Apply the terminal writes whose message is still as expected; how many applied."""

    def server_now(self) -> dt.datetime | None:
        """The database server's clock now, or None when the server does not say its time."""

    def settle_stale_replays(self, now: dt.datetime, settler: str) -> int:
        """Settle the replay runs whose lease ran out by ``now`` (``shared.store.replays``);
        how many messages were settled."""
