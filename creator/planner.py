"""The planner service: turn reminders into pending messages and arm them on the broker.

``Planner`` is a composition of pieces with one job each, sharing one ``PlanContext``:
- ``creator/partition_pass.py``: a planning pass over the partitions this creator holds;
- ``creator/user_planner.py``: planning a few users at once, after a management change;
- ``creator/repairs.py``: what a planning inserted that a change made meanwhile overtook;
- ``creator/wakeups.py``: the one wake-up publisher (sign, delay, flush, count);
- ``creator/rearm.py``: re-arming pending messages from the database (``tzpush rebuild``);
- ``creator/inserts.py``, ``creator/report.py``, ``creator/stream.py``, ``creator/spool.py``:
  inserting, the pass report, the stream helpers, the arming spool.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar, Unpack, cast, overload

from pymongo.database import Database

from creator.context import PlanContext, Where
from creator.inserts import Inserter
from creator.partition_pass import JANITOR_PARTITION, PartitionPass
from creator.rearm import Rearmed, rearm
from creator.repairs import Repairs
from creator.report import PassReport
from creator.user_planner import Known, Narrowing, UserPlanner
from creator.wakeups import WakeupPublisher
from shared.broker import StompClient
from shared.clock import Clock, utcnow
from shared.domain.messages import Doc
from shared.settings import Settings
from shared.store.abc_creator import CreatorStores
from shared.store.partitions import Membership
from shared.wire import WakeUp

__all__ = ["JANITOR_PARTITION", "Known", "PassReport", "Planner"]

T = TypeVar("T")


class _Shared(Generic[T]):
    """An attribute of a ``Planner`` that lives on one of its pieces (``owner``, the name of
    the piece's attribute): reading or setting it on the planner reads or sets it there."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.name = ""

    def __set_name__(self, cls: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, planner: None, cls: type) -> _Shared[T]: ...
    @overload
    def __get__(self, planner: Planner, cls: type) -> T: ...
    def __get__(self, planner: Planner | None, cls: type) -> T | _Shared[T]:
        if planner is None:
            return self
        return cast(T, getattr(getattr(planner, self.owner), self.name))

    def __set__(self, planner: Planner, value: T) -> None:
        setattr(getattr(planner, self.owner), self.name, value)


class Planner:
    """Plans and arms. Takes its collaborators and its clock as arguments.

    ``db``, ``broker``, ``settings``, ``clock`` and ``on_armed`` (told how many wake-ups each
    arming sent) are those of every piece: set one here and every piece uses it from then on.
    ``keep_leases``: the service keeps its partitions between passes (renewed by its heartbeat
    thread); a single pass (``tzpush creator --once``, tests, the bench) takes its share, plans
    it and gives it back, so the next pass or creator can take it at once. ``spool_dir``: where
    a pass spools its arming runs (None: TMPDIR).
    """

    def __init__(
        self,
        database: Where,
        broker: StompClient | None,
        settings: Settings,
        clock: Clock = utcnow,
        *,
        membership: Membership | None = None,
    ) -> None:
        c = settings.creator
        self.ctx = PlanContext(database, broker, settings, clock)
        self.wakeups = WakeupPublisher(self.ctx)
        self.inserter = Inserter(self.ctx)
        self.repairs = Repairs(self.ctx)
        self.users = UserPlanner(self.ctx, self.wakeups, self.inserter, self.repairs)
        self.passes = PartitionPass(
            self.ctx,
            membership or Membership(self.ctx.stores.partitions, c.partitions, c.lease_seconds),
            self.wakeups,
            self.inserter,
            self.repairs,
            self.users,
        )

    # -- what every piece shares: read from, and written to, the context or the pass ----------
    db: _Shared[Database[Doc]] = _Shared("ctx")
    stores: _Shared[CreatorStores] = _Shared("ctx")
    broker: _Shared[StompClient | None] = _Shared("ctx")
    settings: _Shared[Settings] = _Shared("ctx")
    clock: _Shared[Clock] = _Shared("ctx")
    on_armed: _Shared[Callable[[int], None] | None] = _Shared("ctx")
    membership: _Shared[Membership] = _Shared("passes")
    keep_leases: _Shared[bool] = _Shared("passes")
    spool_dir: _Shared[str | None] = _Shared("passes")

    # -- what it does ----------------------------------------------------------------------
    def run_pass(self) -> PassReport:
        """One planning pass over the partitions this creator holds, then (for the holder of
        partition ``JANITOR_PARTITION``) the janitor. Idempotent (``PartitionPass.run``)."""
        return self.passes.run()

    def plan_users(self, user_ids: Sequence[str], **narrow: Unpack[Narrowing]) -> PassReport:
        """Plan these users' reminders for ``[now, plannedUntil)`` at once, after a change
        (``UserPlanner.plan``: ``tokens``, ``reminders`` and ``known`` narrow it)."""
        return self.users.plan(user_ids, **narrow)

    def rearm(
        self,
        start: dt.datetime,
        end: dt.datetime,
        *,
        progress: Callable[[int], object] | None = None,
        take_over_stopped: bool = False,
    ) -> Rearmed:
        """Publish wake-ups for every pending message due in ``[start, end)`` (creator.rearm)."""
        return rearm(
            self.ctx,
            self.wakeups,
            start,
            end,
            progress=progress,
            take_over_stopped=take_over_stopped,
        )

    def arm(self, docs: Iterable[Doc], *, progress: Any = None) -> list[WakeUp]:
        """Group documents into wake-ups and schedule each ``lead`` before its first due instant.

        Returns once the broker has confirmed every wake-up (one receipt for all of them).
        """
        return self.wakeups.arm(docs, progress)
