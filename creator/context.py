"""What every piece of the planner works with: the database, the broker, the settings, the clock.

One ``PlanContext`` is shared by the pieces a ``Planner`` is composed of (``creator/planner.py``),
and each piece reads its fields at the moment it needs them: a caller that gives the planner
another clock or database (tests do) changes it for every piece at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pymongo.database import Database

from shared.broker import StompClient
from shared.clock import Clock
from shared.domain.messages import Doc
from shared.settings import Settings


class Wired(Protocol):
    """What a function that only reads needs of a planner: ``PlanContext`` and ``Planner``
    both are one."""

    @property
    def db(self) -> Database[Doc]: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def clock(self) -> Clock: ...


@dataclass
class PlanContext:
    """The collaborators of the planner's pieces. ``broker`` is None for a planner that only
    plans (arming then raises); ``on_armed`` is told how many wake-ups each arming sent."""

    db: Database[Doc]
    broker: StompClient | None
    settings: Settings
    clock: Clock
    on_armed: Callable[[int], None] | None = None
