"""What every piece of the planner works with: the database, the broker, the settings, the clock.

One ``PlanContext`` is shared by the pieces a ``Planner`` is composed of (``creator/planner.py``),
and each piece reads its fields at the moment it needs them: a caller that gives the planner
another clock or database (tests do) changes it for every piece at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pymongo.database import Database

from shared.broker import StompClient
from shared.clock import Clock
from shared.domain.messages import Doc
from shared.settings import Settings
from shared.store.abc_creator import CreatorStores
from shared.store.mongo import creator_stores

Where = Database[Doc] | CreatorStores
"""A MongoDB database (the creator's stores are made on it) or the stores themselves."""


class Wired(Protocol):
    """What a function that only reads needs of a planner: ``PlanContext`` and ``Planner``
    both are one."""

    @property
    def db(self) -> Database[Doc]: ...
    @property
    def stores(self) -> CreatorStores: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def clock(self) -> Clock: ...


class PlanContext:
    """The collaborators of the planner's pieces. ``broker`` is None for a planner that only
    plans (arming then raises); ``on_armed`` is told how many wake-ups each arming sent.
    ``stores`` is what the pieces read and write; ``db`` is the MongoDB database they were
    made on (an error over other stores). Setting ``db`` makes the stores on it."""

    def __init__(
        self,
        where: Where | None,
        broker: StompClient | None,
        settings: Settings,
        clock: Clock,
        on_armed: Callable[[int], None] | None = None,
    ) -> None:
        self.broker = broker
        self.settings = settings
        self.clock = clock
        self.on_armed = on_armed
        self._db: Database[Doc] | None = None
        self.stores: CreatorStores
        self.db = where

    @property
    def db(self) -> Database[Doc]:
        """The MongoDB database the stores were made on, for the composition (the service's
        health check and fleet reads, the API's reads); an error over other stores. The
        pieces use ``stores`` only (an import contract keeps them off the driver)."""
        if self._db is None:
            raise RuntimeError("this planner works over stores that are not MongoDB")
        return self._db

    @db.setter
    def db(self, where: Where | None) -> None:
        if isinstance(where, CreatorStores):
            self._db, self.stores = None, where
        else:
            self._db = where
            if where is not None:
                self.stores = creator_stores(where)
