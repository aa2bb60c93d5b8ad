"""The MongoDB adapter of the storage seam (``shared.store.abc``): one module per resource.

The only code that names a collection, and the only place for the workarounds of the
MongoDB-compatible server used here (SecantusDB), each commented with what plain MongoDB does.
"""

from __future__ import annotations

from pymongo.database import Database
from pymongo.errors import PyMongoError

from shared.domain.messages import Doc
from shared.store.abc import ConsumerStores
from shared.store.abc_creator import CreatorStores
from shared.store.abc_replays import ReplayStores
from shared.store.families import Parts, assemble
from shared.store.mongo.accounts import MongoErasure, MongoReminders, MongoUsers
from shared.store.mongo.fleet import MongoSenders
from shared.store.mongo.guards import MongoGuards
from shared.store.mongo.intent import MongoCapCounters, MongoCurrentIntent, MongoIntentLog
from shared.store.mongo.journal import MongoJournal
from shared.store.mongo.messages import MongoMessages
from shared.store.mongo.planning import MongoPartitions, MongoPending, MongoPlans
from shared.store.mongo.registrations import MongoChanges, MongoRegistrations
from shared.store.mongo.replays import MongoReplays
from shared.store.mongo.tokens import MongoTokens

StoreError = PyMongoError
"""Any error the database driver raises that ``translate_errors`` left as it is; the consumer
retries it like a ``TransientError`` (it may be a server that is starting, or a bug)."""

Stores = ConsumerStores | Database[Doc]
"""The consumer's stores, or a MongoDB database (its adapter is made for it)."""


def stores_of(where: Stores) -> ConsumerStores:
    """``where`` itself, or the MongoDB adapter of the consumer's stores on it."""
    return where if isinstance(where, ConsumerStores) else consumer_stores(where)


CONSUMER: Parts[Database[Doc]] = {
    "messages": MongoMessages,
    "guards": MongoGuards,
    "journal": MongoJournal,
    "changes": MongoIntentLog,
    "counters": MongoCapCounters,
    "tokens": MongoTokens,
    "current": MongoCurrentIntent,
    "senders": MongoSenders,
}
"""The MongoDB adapter of each of the consumer's stores."""

CREATOR: Parts[Database[Doc]] = {
    "users": MongoUsers,
    "reminders": MongoReminders,
    "erasure": MongoErasure,
    "registrations": MongoRegistrations,
    "changes": MongoChanges,
    "partitions": MongoPartitions,
    "plans": MongoPlans,
    "pending": lambda database: MongoPending(database, consumer_stores(database)),
}
"""The MongoDB adapter of each of the creator's stores."""


def consumer_stores(database: Database[Doc]) -> ConsumerStores:
    """The consumer's stores on ``database``."""
    return assemble(ConsumerStores, database, CONSUMER)


ReplayWhere = ReplayStores | Database[Doc]
"""A replay's stores, or a MongoDB database (its adapter is made for it)."""


def replay_stores(database: Database[Doc]) -> ReplayStores:
    """A replay's stores on ``database``."""
    return ReplayStores(replays=MongoReplays(database), consumer=consumer_stores(database))


def replay_stores_of(where: ReplayWhere) -> ReplayStores:
    """``where`` itself, or the MongoDB adapter of a replay's stores on it."""
    return where if isinstance(where, ReplayStores) else replay_stores(where)


def creator_stores(database: Database[Doc]) -> CreatorStores:
    """The creator's stores on ``database``."""
    return assemble(CreatorStores, database, CREATOR)


__all__ = [
    "MongoCapCounters",
    "MongoCurrentIntent",
    "MongoGuards",
    "MongoIntentLog",
    "MongoJournal",
    "MongoMessages",
    "MongoReplays",
    "MongoSenders",
    "MongoTokens",
    "ReplayWhere",
    "StoreError",
    "Stores",
    "consumer_stores",
    "creator_stores",
    "replay_stores",
    "replay_stores_of",
    "stores_of",
]
