"""The contract suite's backends: the memory twin, and the MongoDB adapter on a database.

``tests/contract`` runs the suite on the memory twin; ``tests/integration/test_contract_mongo.py``
runs the very same test functions on the MongoDB adapter over the integration stack (a second
definition of the stack's session fixtures here would take the stack's lock twice)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.domain.messages import Doc
from shared.store import db as dbm
from shared.store.abc import ConsumerStores
from shared.store.abc_creator import CreatorStores
from shared.store.abc_web import WebStores
from shared.store.memory import Tables, memory_creator_stores, memory_stores
from shared.store.memory.web import memory_web_stores
from shared.store.mongo import consumer_stores, creator_stores
from shared.store.mongo.web import web_stores

COLLECTIONS = {
    "users": dbm.USERS,
    "reminders": dbm.REMINDERS,
    "tokens": dbm.TOKENS,
    "messages": dbm.MESSAGES,
    "guards": dbm.SENDS,
    "journal": dbm.JOURNAL,
    "changes": dbm.CHANGES,
    "counters": dbm.COUNTERS,
    "attempts": dbm.ATTEMPTS,
    "partitions": dbm.PARTITIONS,
    "creators": dbm.CREATORS,
    "state": dbm.STATE,
    "idempotency": dbm.IDEMPOTENCY,
}


@dataclass
class Backend:
    """One adapter family: its stores, and how a test seeds and reads raw documents."""

    name: str
    stores: ConsumerStores
    seed: Callable[..., None]  # seed(table, *docs)
    raw: Callable[[str, str], Doc | None]  # raw(table, id)
    creator: CreatorStores  # the creator's stores over the same data


def memory_backend() -> Backend:
    tables = Tables()
    return Backend(
        "memory", memory_stores(tables), tables.put, tables.get, memory_creator_stores(tables)
    )


def mongo_backend(database: Any) -> Backend:
    dbm.ensure_indexes(database)

    def seed(table: str, *docs: Doc) -> None:
        database[COLLECTIONS[table]].insert_many([dict(d) for d in docs])

    def raw(table: str, doc_id: str) -> Doc | None:
        found: Doc | None = database[COLLECTIONS[table]].find_one({"_id": doc_id})
        return found

    return Backend("mongo", consumer_stores(database), seed, raw, creator_stores(database))


# -- the HTTP API's own records (shared.store.abc_web) ------------------------------------------
WEB_COLLECTIONS = {"idempotency": dbm.IDEMPOTENCY, "sessions": dbm.CONSOLE_SESSIONS}


@dataclass
class WebBackend:
    """The HTTP API's stores of one adapter family, and raw seeding and reading."""

    name: str
    stores: WebStores
    seed: Callable[..., None]  # seed(table, *docs)
    raw: Callable[[str, str], Doc | None]  # raw(table, id)


def memory_web_backend() -> WebBackend:
    tables = Tables()
    return WebBackend("memory", memory_web_stores(tables), tables.put, tables.get)


def mongo_web_backend(database: Any) -> WebBackend:
    stores = web_stores(database)
    stores.ensure_expiry()

    def seed(table: str, *docs: Doc) -> None:
        database[WEB_COLLECTIONS[table]].insert_many([dict(d) for d in docs])

    def raw(table: str, doc_id: str) -> Doc | None:
        found: Doc | None = database[WEB_COLLECTIONS[table]].find_one({"_id": doc_id})
        return found

    return WebBackend("mongo", stores, seed, raw)
