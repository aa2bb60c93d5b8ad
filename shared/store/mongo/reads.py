"""Read models on MongoDB: one user's and one message's records as the HTTP API, the console
and the CLI show them, and the pages of their lists. Read only; each function is one query (or
one walk of windows), and says its order and its limit. A user's messages by due instant are
``shared.store.mongo.history``'s."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass

from pymongo.database import Database

from shared.domain.messages import Doc
from shared.store import db as dbm
from shared.store.mongo.history import ranges_back


# -- users, registrations, reminders ------------------------------------------------------------
def user(database: Database[Doc], user_id: str) -> Doc | None:
    """The user's document, or ``None``."""
    return database[dbm.USERS].find_one({"_id": user_id})


def active_registrations(
    database: Database[Doc], user_id: str, after: str | None, limit: int
) -> list[Doc]:
    """At most ``limit`` of the user's active registrations, by id, after the id ``after``."""
    flt: Doc = {"userId": user_id, "isActive": True}
    if after is not None:
        flt["_id"] = {"$gt": after}
    return list(database[dbm.TOKENS].find(flt).sort("_id", 1).limit(limit))


def live_reminders(
    database: Database[Doc], user_id: str, after: str | None, limit: int
) -> list[Doc]:
    """At most ``limit`` of the user's reminders not deleted (``isDeleted: false``), by id,
    after the id ``after``."""
    flt: Doc = {"userId": user_id, "isDeleted": False}
    if after is not None:
        flt["_id"] = {"$gt": after}
    return list(database[dbm.REMINDERS].find(flt).sort("_id", 1).limit(limit))


def devices_of(database: Database[Doc], token_ids: Collection[str]) -> dict[str, str]:
    """Registration id -> device id, for the registrations of ``token_ids`` that have one
    (one query)."""
    if not token_ids:
        return {}
    return {
        t["_id"]: t["deviceId"]
        for t in database[dbm.TOKENS].find({"_id": {"$in": list(token_ids)}}, {"deviceId": 1})
        if isinstance(t.get("deviceId"), str)
    }


def users_by_id(
    database: Database[Doc], lowest: str, *, inclusive: bool, below: str | None, limit: int
) -> list[Doc]:
    """At most ``limit`` users by id from ``lowest`` (itself too if ``inclusive``) up to
    ``below`` (excluded; ``None``: no end), with the fields the console's list shows: a range
    of ``_id``, which the primary index serves."""
    rng: Doc = {"$gte": lowest} if inclusive else {"$gt": lowest}
    if below is not None:
        rng["$lt"] = below
    return list(database[dbm.USERS].find({"_id": rng}, USER_ROW).sort("_id", 1).limit(limit))


USER_ROW = {"timezone": 1, "prefs.enabled": 1, "dailyCap": 1, "createdAt": 1}


def a_reminder_of(database: Database[Doc], user_id: str) -> Doc | None:
    """One of the user's reminders (any), or ``None``."""
    return database[dbm.REMINDERS].find_one({"userId": user_id})


# -- the console's user page -------------------------------------------------------------------
def registrations_of(database: Database[Doc], user_id: str, limit: int) -> list[Doc]:
    """At most ``limit`` of the user's registrations, active or not, the newest first."""
    return list(database[dbm.TOKENS].find({"userId": user_id}).sort("createdAt", -1).limit(limit))


def reminders_of(database: Database[Doc], user_id: str, limit: int) -> list[Doc]:
    """At most ``limit`` of the user's reminders not deleted (``isDeleted`` not true), by id."""
    return list(
        database[dbm.REMINDERS]
        .find({"userId": user_id, "isDeleted": {"$ne": True}})
        .sort("_id", 1)
        .limit(limit)
    )


def latest_messages(
    database: Database[Doc], user_id: str, until: dt.datetime, want: int
) -> list[Doc]:
    """The user's ``want`` latest messages due at or before ``until``, the latest first (by id
    within an instant).

    The index (userId, scheduledAt) serves these reads; the latest are read back a window at a
    time until ``want`` are found (``ranges_back``)."""
    coll = database[dbm.MESSAGES]
    messages: list[Doc] = []
    for rng in ranges_back(until):
        flt = {"userId": user_id, "scheduledAt": rng}
        messages += (
            coll.find(flt).sort([("scheduledAt", -1), ("_id", 1)]).limit(want - len(messages))
        )
        if len(messages) >= want:
            break
    return messages


def count_messages(
    database: Database[Doc], user_id: str, ahead: dt.datetime, most: int
) -> tuple[int, bool]:
    """How many messages the user has, counted back from ``ahead`` (and all after it) a window
    at a time up to ``most``; and whether counting stopped there (there may be more). A count
    reads every message it counts, and a history only grows."""
    coll = database[dbm.MESSAGES]
    total = coll.count_documents({"userId": user_id, "scheduledAt": {"$gt": ahead}})
    for rng in ranges_back(ahead):
        total += coll.count_documents({"userId": user_id, "scheduledAt": rng})
        if total >= most:
            return total, True
    return total, False


# -- one message -------------------------------------------------------------------------------
def message(database: Database[Doc], message_id: str) -> Doc | None:
    """The message's document, or ``None``."""
    return database[dbm.MESSAGES].find_one({"_id": message_id})


@dataclass(frozen=True)
class MessageState:
    """A message with its send guard (``None``: none held) and its registration (``None``:
    gone)."""

    message: Doc
    guard: Doc | None
    token: Doc | None


def message_state(database: Database[Doc], message_id: str) -> MessageState | None:
    """The message, its send guard and its registration; ``None`` if there is no message."""
    msg = message(database, message_id)
    if msg is None:
        return None
    guard = database[dbm.SENDS].find_one({"_id": message_id})
    token = database[dbm.TOKENS].find_one({"_id": msg.get("notificationTokenId")})
    return MessageState(msg, guard, token)


def attempts_naming(database: Database[Doc], message_id: str, limit: int = 50) -> list[Doc]:
    """At most ``limit`` attempt records that name the message (a request that may have
    left), oldest first. They live until their outcome is recorded (days at most): few, no
    index needed."""
    return list(database[dbm.ATTEMPTS].find({"ids": message_id}).sort("at", 1).limit(limit))


# -- the demo's live view ----------------------------------------------------------------------
def all_messages(database: Database[Doc]) -> list[Doc]:
    """Every message (the demo's own database: a few hundred)."""
    return list(database[dbm.MESSAGES].find())


def all_registrations(database: Database[Doc]) -> list[Doc]:
    """Every registration (the demo's own database: a few dozen)."""
    return list(database[dbm.TOKENS].find())
