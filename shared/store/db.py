"""MongoDB adapter: connection, collection names, indexes, and error translation.

Every driver exception that may go away by itself (network, server selection, primary
stepping down) is translated to ``TransientError`` at this boundary, so callers retry with
back-off; everything else propagates as a bug or a ``PermanentError``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pymongo
from pymongo import ASCENDING, IndexModel, ReadPreference, WriteConcern
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import (
    AutoReconnect,
    BulkWriteError,
    ConnectionFailure,
    NetworkTimeout,
    OperationFailure,
    PyMongoError,
)

from shared.domain.messages import Doc, Status
from shared.errors import TransientError
from shared.settings import MongoSettings

log = logging.getLogger(__name__)

USERS = "users"
REMINDERS = "reminders"
TOKENS = "notification_tokens"
MESSAGES = "notification_messages"
SENDS = "notification_sends"
ATTEMPTS = "send_attempts"
JOURNAL = "send_journal"
CHANGES = "intent_changes"
COUNTERS = "notification_counters"
STATE = "planner_state"
FENCES = "consumer_fences"
SENDERS = "expo_senders"
PARTITIONS = "planner_partitions"
CREATORS = "planner_creators"
# The HTTP API's Idempotency-Key records (``api.idempotency``, which makes its indexes); named
# here so an erasure can remove a user's (``ErasureStore.forget_requests``).
IDEMPOTENCY = "api_idempotency"
# The console's logins (``api.console.session``).
CONSOLE_SESSIONS = "console_sessions"
# The HTTP API's own collections: ``shared.store.mongo.web`` makes their indexes (expiry).
API_COLLECTIONS = (IDEMPOTENCY, CONSOLE_SESSIONS)

ALL_COLLECTIONS = (
    USERS,
    REMINDERS,
    TOKENS,
    MESSAGES,
    SENDS,
    ATTEMPTS,
    JOURNAL,
    CHANGES,
    COUNTERS,
    STATE,
    FENCES,
    SENDERS,
    PARTITIONS,
    CREATORS,
)

ERASED_KEPT_S = 7 * 86400  # how long the intent log keeps an erased user's id

PENDING_UNIQUE = "pending_occurrence_of_reminder"
# Indexes an earlier version made, dropped by a full ``ensure_indexes`` once their successor is
# in (so uniqueness is never unguarded): (instant, user, device, category, label) let one of two
# reminders alike but for their ids be accepted and then dropped at every planning.
RETIRED_INDEXES = {MESSAGES: ["pending_occurrence_unique"]}
ACTIVE_DEVICE_UNIQUE = "one_active_token_per_device"
ACTIVE_TOKEN_UNIQUE = "one_active_registration_per_token"
MESSAGES_BY_USER = "api_messages_by_user"


def index_plan() -> dict[str, list[IndexModel]]:
    """Every index tzpush needs, by collection, with the query each one serves.

    docs/architecture.md lists them with their queries too."""
    return {
        MESSAGES: [
            # Uniqueness of a pending occurrence: one per reminder, device and instant, whatever
            # the version (the case study's index named category and label instead of the
            # reminder, which made two reminders alike one). ``scheduledAt`` first, so the same
            # index serves due-time ranges: janitor, rebuild, stats of pending by hour.
            IndexModel(
                [
                    ("scheduledAt", ASCENDING),
                    ("userId", ASCENDING),
                    ("notificationTokenId", ASCENDING),
                    ("reminderId", ASCENDING),
                ],
                name=PENDING_UNIQUE,
                unique=True,
                partialFilterExpression={"status": Status.PENDING.value, "isDeleted": False},
            ),
            # Receipts poller: tickets whose receipt is due. Partial: free at planning time.
            IndexModel(
                [("receipt.checkAfter", ASCENDING)],
                name="receipt_due",
                partialFilterExpression={"receipt.state": "pending"},
            ),
            # Replay: missed messages by due time. Partial: free at planning time.
            IndexModel(
                [("scheduledAt", ASCENDING)],
                name="missed_by_time",
                partialFilterExpression={"status": Status.IS_MISSED.value},
            ),
            # A user's messages by due instant: the API's list and each reminder's last
            # occurrence, the console's user page, an erasure's sweep. Without it each is a read
            # of every message ever planned (4.4 s at 200,000 here), and history only grows.
            # Named as when only the API made it: MongoDB refuses the same keys under a new name.
            IndexModel([("userId", ASCENDING), ("scheduledAt", ASCENDING)], name=MESSAGES_BY_USER),
            # Failed messages by due time: the console's problems (their reasons, how many a
            # replay would take). Without it that read every message (29 s at 1M here, the
            # driver's timeout is 30 s). Partial: free at planning time.
            IndexModel(
                [("scheduledAt", ASCENDING)],
                name="failed_by_time",
                partialFilterExpression={"status": Status.FAILED.value},
            ),
            # Replays that stopped (the janitor's look, and each replay's start): a handful of
            # documents at any time. Without it the look read every message: at 1M, beside a
            # creator's inserts, past the driver's 30 s timeout. Partial: free at planning time.
            IndexModel(
                [("status", ASCENDING)],
                name="replaying",
                partialFilterExpression={"status": Status.REPLAYING.value},
            ),
        ],
        TOKENS: [
            IndexModel(
                [("deviceId", ASCENDING)],
                name=ACTIVE_DEVICE_UNIQUE,
                unique=True,
                partialFilterExpression={"isActive": True},
            ),
            # One active registration per token string (an app install, whoever logs in on it).
            IndexModel(
                [("token", ASCENDING)],
                name=ACTIVE_TOKEN_UNIQUE,
                unique=True,
                # ``$type``: documents written without a token string (by hand, by another
                # tool) do not collide with each other; the planner reports them as bad.
                partialFilterExpression={"isActive": True, "token": {"$type": "string"}},
            ),
            # Lookups by token string (every login). The server here never uses a partial index
            # whose filter has a ``$type`` clause: without this one every login scanned the
            # tokens (78 ms at 5,000).
            IndexModel([("token", ASCENDING)], name="tokens_by_token"),
            IndexModel([("userId", ASCENDING)], name="tokens_by_user"),
            # Planning: one bucket range of users at a time (shared/domain/plan.py BUCKETS).
            IndexModel([("bucket", ASCENDING)], name="tokens_by_bucket"),
            # Tokens with failures, so a success can reset them without a lookup per token.
            IndexModel(
                [("failureCount", ASCENDING)],
                name="failing_tokens",
                partialFilterExpression={"failureCount": {"$gt": 0}},
            ),
        ],
        REMINDERS: [
            IndexModel([("userId", ASCENDING)], name="reminders_by_user"),
            # Planning reads one bucket range at a time (a chunk of a partition's users), and
            # finds documents written without a bucket ({bucket: null}) to give them one.
            IndexModel([("bucket", ASCENDING)], name="reminders_by_bucket"),
        ],
        USERS: [IndexModel([("bucket", ASCENDING)], name="users_by_bucket")],
        # An erasure removes the user's Idempotency-Key records (the API makes their TTL index).
        IDEMPOTENCY: [IndexModel([("userId", ASCENDING)], name="idempotency_by_user")],
        CHANGES: [
            IndexModel([("at", ASCENDING)], name="changes_by_time"),
            # An erased user's stamp is the only thing of theirs an erasure keeps: a planning or a
            # consumer that read the user before the erasure finds it (``erased_in``), and a
            # pass that died is swept by the next (``changed_in``). A week covers both.
            IndexModel(
                [("erasedAt", ASCENDING)], name="erased_expire", expireAfterSeconds=ERASED_KEPT_S
            ),
        ],
        # Daily-cap counters (``shared.store.intent``): reserved by ``_id``; an erasure deletes
        # a user's by ``userId``; each expires days after its local date is over.
        COUNTERS: [
            IndexModel([("userId", ASCENDING)], name="counters_by_user"),
            IndexModel([("at", ASCENDING)], name="counters_expire", expireAfterSeconds=8 * 86400),
        ],
        ATTEMPTS: [
            IndexModel([("at", ASCENDING)], name="attempts_expire", expireAfterSeconds=7 * 86400)
        ],
        FENCES: [
            IndexModel([("at", ASCENDING)], name="fences_expire", expireAfterSeconds=7 * 86400)
        ],
        # Live creators (who shares the planning partitions); a creator that died without
        # leaving is gone after an hour (it stops counting as live after its lease anyway).
        CREATORS: [
            IndexModel(
                [("heartbeatAt", ASCENDING)], name="creators_by_heartbeat", expireAfterSeconds=3600
            )
        ],
        # Live senders by heartbeat (Expo's rate shared by the fleet; stats and /healthz);
        # a sender that died without leaving is gone after an hour.
        SENDERS: [
            IndexModel(
                [("heartbeatAt", ASCENDING)], name="senders_by_heartbeat", expireAfterSeconds=3600
            )
        ],
    }


def connect(settings: MongoSettings, **client_options: Any) -> Database[Doc]:
    """Open a client (aware UTC datetimes) and return the configured database; ``client_options``
    go to ``MongoClient`` as well (a test's ``event_listeners``)."""
    client: pymongo.MongoClient[Doc] = pymongo.MongoClient(
        settings.uri.get_secret_value(),
        tz_aware=True,
        serverSelectionTimeoutMS=settings.timeout_ms,
        connectTimeoutMS=settings.timeout_ms,
        socketTimeoutMS=max(settings.timeout_ms * 6, 30000),
        retryWrites=True,
        appname="tzpush",
        **client_options,
    )
    concern = settings.write_concern
    _CONCERNS[client] = WriteConcern(w=int(concern) if concern.isdigit() else concern)
    return client[settings.database]


MAJORITY = WriteConcern(w="majority")
# The write concern of ``critical`` per client, from the settings it was opened with (a client
# opened elsewhere, e.g. by a test, gets MAJORITY).
_CONCERNS: weakref.WeakKeyDictionary[pymongo.MongoClient[Doc], WriteConcern] = (
    weakref.WeakKeyDictionary()
)


def critical(database: Database[Doc], name: str) -> Collection[Doc]:
    """The collection ``name`` for what exactly-once rests on (send guards and fences, the send
    journal, terminal writes, creators' leases): writes acknowledged under
    ``TZPUSH_MONGO__WRITE_CONCERN`` (majority by default, so a replica set's failover cannot roll
    them back) and reads from the primary (a decision never rests on a lagging secondary)."""
    return database.get_collection(
        name,
        write_concern=_CONCERNS.get(database.client, MAJORITY),
        read_preference=ReadPreference.PRIMARY,
    )


INDEX_PLAN_ID = "index-plan"  # in STATE: the digest of the last index plan fully ensured


def index_plan_digest(plan: dict[str, list[IndexModel]] | None = None) -> str:
    """A digest of ``index_plan()``: it changes whenever an index is added or changed."""
    docs = sorted(
        (coll, [m.document for m in models]) for coll, models in (plan or index_plan()).items()
    )
    return hashlib.sha256(repr(docs).encode()).hexdigest()[:16]


def ensure_indexes(db: Database[Doc], *, trust_marker: bool = False) -> None:
    """Create every index idempotently (safe at each start-up, and from several processes).

    ``trust_marker``: skip the work (one round trip instead of one per collection) when the
    last full run recorded this very plan. The consumer starts this way, so a restart after an
    outage is sending sooner; the creator, `tzpush doctor --fix-indexes` and the demo always do
    the full run, so an index dropped by hand comes back at the next creator start.
    """
    plan = index_plan()
    digest = index_plan_digest(plan)
    with translate_errors("creating indexes"):
        if trust_marker:
            done = db[STATE].find_one({"_id": INDEX_PLAN_ID}, {"digest": 1})
            if done is not None and done.get("digest") == digest:
                return
        for coll, models in plan.items():
            db[coll].create_indexes(models)
        for coll, names in RETIRED_INDEXES.items():
            have = {ix["name"] for ix in db[coll].list_indexes()}
            for name in sorted(have & set(names)):
                db[coll].drop_index(name)
        db[STATE].update_one(
            {"_id": INDEX_PLAN_ID},
            {"$set": {"digest": digest, "at": dt.datetime.now(dt.UTC)}},
            upsert=True,
        )


def missing_indexes(db: Database[Doc]) -> list[str]:
    """Names of planned indexes that the database does not have (for `tzpush doctor`)."""
    missing = []
    with translate_errors("listing indexes"):
        for coll, models in index_plan().items():
            have = {ix["name"] for ix in db[coll].list_indexes()}
            missing += [
                f"{coll}.{m.document['name']}" for m in models if m.document["name"] not in have
            ]
    return missing


@contextlib.contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Turn the driver's passing failures into TransientError naming what was being done."""
    try:
        yield
    except (AutoReconnect, ConnectionFailure, NetworkTimeout) as exc:
        raise TransientError(f"database unavailable while {what}: {exc}") from exc
    except PyMongoError as exc:
        if exc.has_error_label("RetryableWriteError") or exc.has_error_label(
            "TransientTransactionError"
        ):
            raise TransientError(f"database error while {what}: {exc}") from exc
        raise


def is_duplicate_on_id(error: Doc) -> bool:
    """Whether a bulk write error entry is a duplicate ``_id`` (vs. another unique index)."""
    if error.get("code") != 11000:
        return False
    key = error.get("keyPattern") or error.get("keyValue") or {}
    if key:
        return set(key) == {"_id"}
    return "_id_" in str(error.get("errmsg", ""))


@dataclass(frozen=True, slots=True)
class ServerClock:
    """The database server's clock, read once: ``server`` is what it said (``hello``'s
    ``localTime``), ``local`` this host's clock at the middle of that round trip."""

    server: dt.datetime
    local: dt.datetime
    rtt_s: float

    @property
    def skew_s(self) -> float:
        """How far this host's clock is ahead of the server's (negative: behind), in seconds,
        give or take half the round trip."""
        return (self.local - self.server).total_seconds()

    @property
    def ahead_at_most_s(self) -> float:
        """The most this host's clock can be ahead of the server's: as if the server had read
        its clock at the very start of the round trip. "Now" corrected by it is never later
        than the server's now."""
        return self.skew_s + self.rtt_s / 2


def server_clock(
    database: Database[Doc], clock: Callable[[], dt.datetime] | None = None
) -> ServerClock | None:
    """Read the database server's clock, or ``None`` if the server does not say its time.

    MongoDB (and SecantusDB) put ``localTime`` in the answer to ``hello`` (``isMaster`` before
    4.4.2). Deciding by the server's clock makes every process agree on "now" whatever their
    own clocks say (the janitor ends nothing before its due instant plus grace by it).
    """
    now = clock or (lambda: dt.datetime.now(dt.UTC))
    with translate_errors("reading the database server's clock"):
        started, t0 = now(), time.monotonic()
        try:
            reply = database.client.admin.command("hello")
        except OperationFailure:
            reply = database.client.admin.command("isMaster")
        rtt = time.monotonic() - t0
    at = reply.get("localTime")
    if not isinstance(at, dt.datetime):
        return None
    if at.tzinfo is None:  # a client opened without tz_aware: BSON dates are UTC
        at = at.replace(tzinfo=dt.UTC)
    return ServerClock(at, started + dt.timedelta(seconds=rtt / 2), rtt)


def insert_refused(coll: Collection[Doc], docs: list[Doc]) -> set[int]:
    """Insert ``docs`` (unordered); the positions of those the database refused on a unique
    index (a concurrent writer took their id, device or token string)."""
    try:
        coll.insert_many(docs, ordered=False)
    except BulkWriteError as exc:
        return {int(e["index"]) for e in exc.details.get("writeErrors", [])}
    return set()
