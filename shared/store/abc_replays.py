"""The storage seam, replays: what a replay run takes, holds, records and settles on the messages.

``shared.store.mongo.replays`` implements ``ReplayStore`` on MongoDB. The rules over it (the
replay record a take stamps, the fence before settling, ``shared.domain.replay.settle_one``,
when a lease ran out) live in ``shared.store.replays``; the rest of what a replay needs (the
current intent, daily caps, token hygiene, attempt records) is the consumer's stores'.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.domain.messages import Doc, Status
from shared.store.abc import ConsumerStores


@dataclass(frozen=True, slots=True)
class HeldWrite:
    """A write on message ``id`` while ``holder`` holds it (``replaying``, ``replay.holder`` is
    ``holder``): set ``fields``, unset ``unset``, add ``attempts`` (``None``: not touched). One
    whose message is no longer held so changes nothing."""

    id: str
    holder: str
    fields: Mapping[str, Any]
    unset: tuple[str, ...] = ()
    attempts: int | None = None


@dataclass
class Settled:
    """What settling a stopped run did: back to where they were taken from, ``is_missed`` or
    ``failed`` (``missed``: certainly never left), and ``failed`` "outcome unknown" (may have
    left)."""

    missed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def __iadd__(self, other: Settled) -> Settled:
        self.missed += other.missed
        self.unknown += other.unknown
        return self

    def __bool__(self) -> bool:
        return bool(self.missed or self.unknown)

    def describe(self) -> str:
        return (
            f"{len(self.missed)} back to is_missed or failed, as before (never sent), "
            f"{len(self.unknown)} failed (outcome unknown, may have been sent)"
        )


class ReplayStore(Protocol):
    """The messages as replays take, hold and give them back, and a run's attempt records."""

    def selected(self, query: Doc) -> list[Doc]:
        """The messages ``query`` (``Selection.query()``) names, in no particular order."""

    def take(self, message_id: str, origin: Status, also: Mapping[str, Any], record: Doc) -> bool:
        """Set the message ``replaying`` with ``record`` as its ``replay`` if it still has status
        ``origin`` and the fields ``also`` (a compare-and-set); whether it was taken."""

    def hand_over(
        self, run: str, ids: Collection[str], holder: str, lease_until: dt.datetime
    ) -> list[Doc]:
        """Move ``run``'s hold of ``ids`` to ``holder`` (``replay.holder`` and ``replay.sender``),
        its lease until ``lease_until``; the messages ``holder`` now holds."""

    def holds(self, holder: str, ids: Collection[str]) -> int:
        """How many of ``ids`` are ``replaying`` and held by ``holder``."""

    def forget_attempts(self, run: str) -> None:
        """Delete every attempt record named by ``run``."""

    def write(self, writes: Sequence[HeldWrite]) -> None:
        """Apply ``writes``, unordered: each stands alone. None: no write."""

    def fence(self, holder: str | None, fence: str, taken_before: dt.datetime | None) -> list[Doc]:
        """Move every ``replaying`` message held by ``holder`` (``None``: held by nobody, and
        taken before ``taken_before``) to ``fence``; every message ``fence`` then holds, with
        ``replay.run``, ``at``, ``from`` and ``sender``."""

    def replaying(self) -> list[Doc]:
        """Every ``replaying`` message, with ``replay.holder`` and ``replay.leaseUntil``."""

    def give_back(self, counters: Sequence[str]) -> None:
        """Take one off each of these daily-cap counters (a replay's reservation, unused)."""


@dataclass(frozen=True)
class ReplayStores:
    """Everything a replay needs of storage: its own store and the consumer's."""

    replays: ReplayStore
    consumer: ConsumerStores
