"""The storage seam: what the services need of the database, one Protocol per resource.

Services speak to these interfaces; ``shared.store.mongo`` implements them on MongoDB (the only
code that names a collection) and ``shared.store.memory`` in memory, with the same semantics
(unique refusals, compare-and-set), checked by one contract suite (``tests/contract``). Plain
records and ``Doc`` dicts cross the seam, never a driver type.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.domain.messages import Doc, Status

# -- the consumer's resources: messages, guards, journal, intent log, counters, tokens ----------


@dataclass(frozen=True, slots=True)
class Ending:
    """A terminal write: ``id`` ends ``status`` with ``reason`` at ``at``, only if it is still
    ``expect`` (a compare-and-set: of two writers ending one message, one wins)."""

    id: str
    status: Status
    reason: str
    at: dt.datetime
    expect: Status = Status.PENDING
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A sent message's outcome fields, set unless the message already ended at ``at`` (the
    same outcome merged twice changes nothing)."""

    id: str
    at: dt.datetime
    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Guard:
    """Who holds the send guard of message ``id``, since ``at``, for which wake-up."""

    id: str
    owner: str
    at: dt.datetime | None
    wakeup: str | None = None
    taken_over_from: str | None = None

    @classmethod
    def of(cls, doc: Doc) -> Guard:
        """The guard a stored guard document says."""
        return cls(
            id=doc["_id"],
            owner=str(doc.get("owner")),
            at=doc.get("at"),
            wakeup=doc.get("wakeup"),
            taken_over_from=doc.get("takenOverFrom"),
        )


class MessageStore(Protocol):
    def pending_ids(self, start: dt.datetime, end: dt.datetime) -> frozenset[str]:
        """Ids of pending, not deleted messages with ``start <= scheduledAt <= end``."""

    def statuses(self, ids: Collection[str]) -> dict[str, str]:
        """The status of each of ``ids`` that exists."""

    def get(self, message_id: str) -> Doc | None: ...

    def end(self, endings: Sequence[Ending]) -> int:
        """Apply the terminal writes whose message is still as expected; how many applied."""

    def apply(self, outcomes: Sequence[Outcome]) -> None:
        """Set each outcome's fields unless its message's ``finishedAt`` is already ``at``."""

    def receipts_due(self, now: dt.datetime, limit: int) -> list[Doc]:
        """Sent messages whose receipt is pending and due (``receipt.checkAfter <= now``)."""

    def set_fields(self, changes: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Set dotted ``fields`` on each message id (receipts: ``receipt.state`` ...)."""


class GuardStore(Protocol):
    """Send guards, fences and attempt records (``shared/store/guards.py`` has the rule)."""

    def take(
        self, ids: Sequence[str], owner: str, now: dt.datetime, wakeup: str | None = None
    ) -> set[str]:
        """Insert guards; the ids this owner got (a guard that exists refuses the insert)."""

    def holder(self, message_id: str) -> Guard | None: ...

    def take_over(self, guard: Guard, owner: str, now: dt.datetime, wakeup: str) -> bool:
        """Move ``guard`` to ``owner`` if its holder and time are unchanged (compare-and-set)."""

    def release(self, ids: Collection[str], owner: str, *, budget_s: float | None = None) -> None:
        """Delete ``owner``'s guards of ``ids`` (others' guards stay); ``budget_s`` bounds the
        whole attempt, server selection included."""

    def fence(self, holder: str, by: str, now: dt.datetime) -> None: ...

    def fenced_by(self, consumer: str) -> str | None: ...

    def record_attempt(
        self, record_id: str, consumer: str, at: dt.datetime, ids: Sequence[str]
    ) -> None:
        """Record that ``ids`` may have left for Expo (a request is about to start)."""

    def maybe_sent(self, consumer: str) -> set[str]:
        """Ids in ``consumer``'s attempt records."""

    def in_attempt(self, consumer: object, message_id: str) -> bool:
        """Whether ``consumer`` has an attempt record naming the message."""

    def drop_attempts(self, record_ids: Collection[str]) -> None: ...


class JournalStore(Protocol):
    """The send journal: outcomes made durable at once, merged into messages later."""

    def add(self, doc: Doc) -> None:
        """Insert a journal document; one with the same ``_id`` already in is not an error."""

    def left(self, consumer: str | None = None, before: dt.datetime | None = None) -> list[Doc]:
        """Journal documents (of ``consumer``; written before ``before``)."""

    def delete(self, ids: Collection[str]) -> None: ...


class IntentLog(Protocol):
    """Which users' intent changed when (a consumer rechecks them in full)."""

    def record(self, user_ids: Collection[str], now: dt.datetime, *, erased: bool = False) -> None:
        """Stamp the users (``erased``: also ``erasedAt``)."""

    def changed_since(self, since: dt.datetime) -> set[str]:
        """String user ids stamped at or after ``since`` (the caller allows for clock skew)."""


class CapCounters(Protocol):
    """Daily-cap counters: ``_id`` is ``user:local date``."""

    def reserve(self, key: str, user_id: str, want: int, limit: int, now: dt.datetime) -> bool:
        """Add ``want`` if the count stays within ``limit`` (creating the counter at 0)."""

    def count(self, key: str) -> int: ...

    def refund(self, refunds: Sequence[tuple[str, str]]) -> None:
        """For each (counter, message id), give one back, once per message id."""


class TokenStore(Protocol):
    """Registrations as the consumer needs them: reads and the hygiene writes."""

    def by_ids(self, ids: Collection[str]) -> dict[str, Doc]: ...

    def deactivate(self, token_ids: Collection[str], reason: str, now: dt.datetime) -> list[Doc]:
        """Turn off the active ones among ``token_ids``; those this call turned off."""

    def count_failure(
        self, token_id: str, at: dt.datetime, message_id: str | None, now: dt.datetime
    ) -> Doc | None:
        """Count a failure pushed at ``at`` unless a success pushed later reset the run, or
        this message's failure is counted already; the registration after it, if counted (or
        counted before), else ``None``."""

    def failing(self) -> set[str]:
        """Ids of registrations with failures counted."""

    def reset_failures(self, token_id: str, at: dt.datetime, now: dt.datetime) -> bool:
        """Reset the count unless a failure pushed after ``at`` was counted."""


class CurrentIntent(Protocol):
    """The current users and reminders by id (the intent check of a changed user)."""

    def users(self, ids: Collection[str]) -> dict[str, Doc]: ...

    def reminders(self, ids: Collection[str]) -> dict[str, Doc]: ...


class SenderRegistry(Protocol):
    """Live Expo senders (consumers, replays): who shares the fleet's rate."""

    def beat(
        self, sender_id: str, now: dt.datetime, fields: Mapping[str, Any], first: Mapping[str, Any]
    ) -> None:
        """Set ``heartbeatAt`` (``now``) and ``fields``; ``first`` only when the sender is new."""

    def live_since(self, since: dt.datetime) -> list[Doc]:
        """Senders whose heartbeat is at or after ``since``."""

    def leave(self, sender_id: str) -> None: ...


@dataclass(frozen=True)
class ConsumerStores:
    """Everything a consumer needs of storage, one adapter family."""

    messages: MessageStore
    guards: GuardStore
    journal: JournalStore
    changes: IntentLog
    counters: CapCounters
    tokens: TokenStore
    current: CurrentIntent
    senders: SenderRegistry
