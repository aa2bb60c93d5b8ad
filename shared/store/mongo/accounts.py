"""The MongoDB adapter of the creator's accounts stores (``shared.store.abc_accounts``)."""

from __future__ import annotations

from pymongo.database import Database

from shared.domain.messages import Doc


class MongoUsers:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database


class MongoReminders:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database


class MongoErasure:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database
