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
from collections.abc import Iterator

import pymongo
from pymongo import ASCENDING, IndexModel
from pymongo.database import Database
from pymongo.errors import AutoReconnect, ConnectionFailure, NetworkTimeout, PyMongoError

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
)

PENDING_UNIQUE = "pending_occurrence_unique"
ACTIVE_DEVICE_UNIQUE = "one_active_token_per_device"


def index_plan() -> dict[str, list[IndexModel]]:
    """Every index tzpush needs, by collection, with the query each one serves (see README)."""
    return {
        MESSAGES: [
            # Uniqueness of a pending occurrence (the case study's index; keys reordered so the
            # same index serves due-time ranges: janitor, rebuild, stats of pending by hour).
            IndexModel(
                [
                    ("scheduledAt", ASCENDING),
                    ("userId", ASCENDING),
                    ("notificationTokenId", ASCENDING),
                    ("category", ASCENDING),
                    ("label", ASCENDING),
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
        ],
        TOKENS: [
            IndexModel(
                [("deviceId", ASCENDING)],
                name=ACTIVE_DEVICE_UNIQUE,
                unique=True,
                partialFilterExpression={"isActive": True},
            ),
            IndexModel([("userId", ASCENDING)], name="tokens_by_user"),
            # Tokens with failures, so a success can reset them without a lookup per token.
            IndexModel(
                [("failureCount", ASCENDING)],
                name="failing_tokens",
                partialFilterExpression={"failureCount": {"$gt": 0}},
            ),
        ],
        REMINDERS: [IndexModel([("userId", ASCENDING)], name="reminders_by_user")],
        CHANGES: [IndexModel([("at", ASCENDING)], name="changes_by_time")],
        ATTEMPTS: [
            IndexModel([("at", ASCENDING)], name="attempts_expire", expireAfterSeconds=7 * 86400)
        ],
    }


def connect(settings: MongoSettings) -> Database[Doc]:
    """Open a client (aware UTC datetimes) and return the configured database."""
    client: pymongo.MongoClient[Doc] = pymongo.MongoClient(
        settings.uri.get_secret_value(),
        tz_aware=True,
        serverSelectionTimeoutMS=settings.timeout_ms,
        connectTimeoutMS=settings.timeout_ms,
        socketTimeoutMS=max(settings.timeout_ms * 6, 30000),
        retryWrites=True,
        appname="tzpush",
    )
    return client[settings.database]


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
