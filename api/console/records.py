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

from pymongo.database import Database

from api.models import ReminderOut, UserOut
from api.views import reminder_out, user_out
from shared.domain.messages import Doc
from shared.store.mongo import reads
from shared.store.mongo.history import last_occurrences

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
    doc = reads.user(database, user_id)
    tokens = reads.registrations_of(database, user_id, TOKENS_LISTED)
    reminders = reads.reminders_of(database, user_id, REMINDERS_LISTED)
    last = last_occurrences(database, user_id, reminders, now)
    ahead = now + dt.timedelta(days=2)
    messages = reads.latest_messages(database, user_id, ahead, TIMELINE)
    total, more = reads.count_messages(database, user_id, ahead, COUNTED)
    return UserRecord(
        user=user_out(doc, categories) if doc is not None else None,
        tokens=tokens,
        reminders=[reminder_out(r, doc, now, last.get(str(r["_id"]))) for r in reminders],
        messages=messages,
        message_total=total,
        message_total_more=more,
    )


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
    state = reads.message_state(database, message_id)
    if state is None:
        return None
    attempts = reads.attempts_naming(database, message_id)
    return MessageRecord(
        message=state.message, guard=state.guard, token=state.token, attempts=attempts
    )
