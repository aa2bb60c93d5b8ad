"""The MongoDB adapter of the creator's planning stores (``shared.store.abc_planning``)."""

from __future__ import annotations

from pymongo.database import Database

from shared.domain.messages import Doc


class MongoPartitions:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database


class MongoPlans:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database


class MongoPending:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database
