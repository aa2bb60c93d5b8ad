"""The HTTP API's own records on MongoDB: Idempotency-Key records (``api_idempotency``) and
console sessions (``console_sessions``). The rules they serve are ``api.idempotency`` and
``api.console.session``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from pymongo import ASCENDING, IndexModel
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from shared.clock import Clock
from shared.domain.messages import Doc
from shared.store import db as dbm
from shared.store.abc_web import WebStores
from shared.store.server_time import ServerTime

# Records go a day after the key's first use (the API checks ``createdAt`` on read too).
IDEMPOTENCY_INDEXES = [
    IndexModel([("createdAt", ASCENDING)], name="idempotency_expire", expireAfterSeconds=86400)
]
# A session goes at its ``expiresAt`` (the console checks it at each read too).
SESSION_INDEXES = [
    IndexModel([("expiresAt", ASCENDING)], name="console_sessions_expire", expireAfterSeconds=0)
]


class MongoIdempotency:
    def __init__(self, database: Database[Doc]) -> None:
        self.database = database
        self.coll = database[dbm.IDEMPOTENCY]

    def clock(self, local: Clock, read_every: dt.timedelta) -> Clock:
        return ServerTime(self.database, local, read_every)

    def claim(self, record: Doc) -> bool:
        try:
            self.coll.insert_one(dict(record))
        except DuplicateKeyError:
            return False
        return True

    def get(self, record_id: str) -> Doc | None:
        return self.coll.find_one({"_id": record_id})

    def drop_expired(self, record_id: str, created_at: Any) -> None:
        self.coll.delete_one({"_id": record_id, "createdAt": created_at})

    def take_over(
        self, record_id: str, state: Any, claimed_at: Any, fields: Mapping[str, Any]
    ) -> bool:
        taken = self.coll.update_one(
            {"_id": record_id, "state": state, "claimedAt": claimed_at}, {"$set": dict(fields)}
        )
        return taken.modified_count == 1

    def complete(self, record_id: str, fields: Mapping[str, Any]) -> None:
        self.coll.update_one({"_id": record_id}, {"$set": dict(fields)})

    def release(self, record_id: str, attempt: str | None) -> None:
        self.coll.delete_one({"_id": record_id, "state": "running", "attempt": attempt})

    def cut(self, record_id: str, attempt: str | None, claimed_at: dt.datetime) -> None:
        self.coll.update_one(
            {"_id": record_id, "state": "running", "attempt": attempt},
            {"$set": {"claimedAt": claimed_at}},
        )

    def ensure_expiry(self) -> None:
        self.coll.create_indexes(IDEMPOTENCY_INDEXES)


class MongoSessions:
    def __init__(self, database: Database[Doc]) -> None:
        self.coll = database[dbm.CONSOLE_SESSIONS]

    def add(self, session: Doc) -> None:
        self.coll.insert_one(dict(session))

    def get(self, session_id: str) -> Doc | None:
        return self.coll.find_one({"_id": session_id})

    def delete(self, session_id: str) -> None:
        self.coll.delete_one({"_id": session_id})

    def ensure_expiry(self) -> None:
        self.coll.create_indexes(SESSION_INDEXES)


def web_stores(database: Database[Doc]) -> WebStores:
    """The HTTP API's own stores on ``database``."""
    return WebStores(idempotency=MongoIdempotency(database), sessions=MongoSessions(database))
