"""One user and one message, as the console shows them.

A user: their settings as ``GET /v1/users/{id}`` gives them (``api.views.user_out``), every
registration of theirs (active or not, with its failure count and why it was deactivated, as
``tzpush tokens list``), their reminders with the next and the last occurrence
(``api.views.reminder_out``, as the API answers them) and their latest messages.

A message: what ``tzpush messages show`` prints (the document, its send guard, its token's
state) and, beside it, the attempt records that name it (a request that may have left) and its
receipt. Documents may have been edited by hand: nothing here assumes a field's type.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from pymongo.collection import Collection
from pymongo.database import Database

from api.models import ReminderOut, UserOut
from api.views import reminder_out, user_out
from shared.domain.messages import Doc
from shared.store import db as dbm
from shared.store.history import last_occurrences, ranges_back

TIMELINE = 50
# A user's messages are counted back from the timeline's end up to this many ("or more"
# past it): a count reads every message it counts, and a history only grows.
COUNTED = 500
TOKENS_LISTED = 100
REMINDERS_LISTED = 500


@dataclass
class UserRecord:
    user: UserOut | None  # None: no such user (erased, or never was); their messages may remain
    tokens: list[Doc]
    reminders: list[ReminderOut]
    messages: list[Doc]
    message_total: int
    message_total_more: bool = False  # at least ``message_total``: counting stopped there


def user_record(
    database: Database[Doc], user_id: str, categories: Any, now: dt.datetime
) -> UserRecord:
    doc = database[dbm.USERS].find_one({"_id": user_id})
    tokens = list(
        database[dbm.TOKENS].find({"userId": user_id}).sort("createdAt", -1).limit(TOKENS_LISTED)
    )
    reminders = list(
        database[dbm.REMINDERS]
        .find({"userId": user_id, "isDeleted": {"$ne": True}})
        .sort("_id", 1)
        .limit(REMINDERS_LISTED)
    )
    last = last_occurrences(database, user_id, reminders, now)
    coll = database[dbm.MESSAGES]
    # The API's index (userId, scheduledAt) serves these reads; the latest are read back a
    # window at a time until a timeline's worth is found (shared.store.history.ranges_back).
    ahead = now + dt.timedelta(days=2)
    messages: list[Doc] = []
    for rng in ranges_back(ahead):
        flt = {"userId": user_id, "scheduledAt": rng}
        want = TIMELINE - len(messages)
        messages += coll.find(flt).sort([("scheduledAt", -1), ("_id", 1)]).limit(want)
        if len(messages) >= TIMELINE:
            break
    total, more = _count(coll, user_id, ahead)
    return UserRecord(
        user=user_out(doc, categories) if doc is not None else None,
        tokens=tokens,
        reminders=[reminder_out(r, doc, now, last.get(str(r["_id"]))) for r in reminders],
        messages=messages,
        message_total=total,
        message_total_more=more,
    )


def _count(coll: Collection[Doc], user_id: str, ahead: dt.datetime) -> tuple[int, bool]:
    """How many messages the user has, counted back a window at a time up to ``COUNTED``; and
    whether counting stopped there (there may be more)."""
    total = coll.count_documents({"userId": user_id, "scheduledAt": {"$gt": ahead}})
    for rng in ranges_back(ahead):
        total += coll.count_documents({"userId": user_id, "scheduledAt": rng})
        if total >= COUNTED:
            return total, True
    return total, False


@dataclass
class MessageRecord:
    message: Doc
    guard: Doc | None
    token: Doc | None
    attempts: list[Doc]

    def shown(self) -> str:
        """What ``tzpush messages show`` prints, as JSON."""
        token = self.token and {
            k: self.token.get(k) for k in ("_id", "isActive", "deactivationReason")
        }
        out = {"message": self.message, "sendGuard": self.guard, "token": token}
        return json.dumps(out, indent=2, default=str, ensure_ascii=False)


def message_record(database: Database[Doc], message_id: str) -> MessageRecord | None:
    msg = database[dbm.MESSAGES].find_one({"_id": message_id})
    if msg is None:
        return None
    guard = database[dbm.SENDS].find_one({"_id": message_id})
    token = database[dbm.TOKENS].find_one({"_id": msg.get("notificationTokenId")})
    # Attempt records live until their outcome is recorded (days at most): few, no index needed.
    attempts = list(database[dbm.ATTEMPTS].find({"ids": message_id}).sort("at", 1).limit(50))
    return MessageRecord(message=msg, guard=guard, token=token, attempts=attempts)
