"""What erasing a user does to their messages, and the look for users erased while a planning
held their documents.

``scrub`` is the erasure's sweep of the messages (``creator.accounts.erase_user``): pending and
missed ones end ``cancelled`` "user erased", and every message of the user is anonymised. A
planning that read a user before their erasure inserts afterwards what it planned from them,
out of that sweep's reach. The planning looks after its insert for users gone meanwhile
(``missing``; a pass only among the users its change log shows changed since it began) and
sweeps them again: the erasure deletes the user before its sweep, the planning inserts before
its look, so one of the two sees the other (``creator.planner.Planner._sweep_erased``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection

from pymongo.database import Database

from shared.domain.messages import Doc, Status, terminal_update
from shared.store import db as dbm

ERASED = "user erased"
SCRUBBED = ("title", "body", "data", "label", "token", "timezone")


def scrub(database: Database[Doc], user_id: str, now: dt.datetime) -> tuple[int, int, str]:
    """End the user's pending and missed messages ``cancelled`` "user erased" (nothing pending
    stays, nothing missed can be replayed) and anonymise all of them: the user id becomes a
    random ``erased-...`` id (one per sweep, unlinkable) and the push's text, data, label,
    token and zone are removed. Returns (ended, anonymised, the pseudonym)."""
    messages = database[dbm.MESSAGES]
    ended = messages.update_many(
        {"userId": user_id, "status": {"$in": [Status.PENDING.value, Status.IS_MISSED.value]}},
        {"$set": terminal_update(Status.CANCELLED, ERASED, now)},
    ).modified_count
    pseudonym = "erased-" + uuid.uuid4().hex[:16]
    blank = dict.fromkeys(SCRUBBED, None)
    anonymised = messages.update_many(
        {"userId": user_id}, {"$set": {**blank, "userId": pseudonym, "erasedAt": now}}
    ).modified_count
    return ended, anonymised, pseudonym


def missing(database: Database[Doc], user_ids: Collection[str]) -> set[str]:
    """Which of these users no longer exist (one lookup by id)."""
    if not user_ids:
        return set()
    present = database[dbm.USERS].find({"_id": {"$in": sorted(user_ids)}}, {"_id": 1})
    return set(user_ids) - {d["_id"] for d in present}
