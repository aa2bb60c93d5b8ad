"""The MongoDB adapter of the registrations stores (``shared.store.abc_registrations``)."""

from __future__ import annotations

from pymongo.database import Database

from shared.domain.messages import Doc


class MongoRegistrations:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database


class MongoChanges:
    def __init__(self, database: Database[Doc]) -> None:
        self.db = database
