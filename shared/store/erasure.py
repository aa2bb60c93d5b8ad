"""What erasing a user does to their messages, and the look for users erased while a planning
held their documents.

``scrub`` is the erasure's sweep of the messages (``creator.accounts.erase_user``): pending and
missed ones end ``cancelled`` "user erased", and every message of the user is anonymised. A
planning that read a user before their erasure inserts afterwards what it planned from them,
out of that sweep's reach. The planning looks after its insert for users gone meanwhile
(``incarnations``: gone, or another user under the same id, created since the planning read the
first; a pass only among the users its change log shows changed since it began) and ends
what it inserted for them (``scrub_ids``): the erasure deletes the user before its sweep, the
planning inserts before its look, so one of the two sees the other. A pass that died before its
look leaves it to the pass planning its window again, which sweeps every user of those
partitions erased since (``scrub(planned_before=...)``)
(``creator.repairs.Repairs.drop_erased``, ``sweep_dead_window``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database

from shared.domain.messages import Doc, Status, terminal_update
from shared.store import db as dbm
from shared.store.messages import end

ERASED = "user erased"
SCRUBBED = ("title", "body", "data", "label", "token", "timezone")
LOOKUP = 1000  # ids per lookup of users


def forget_requests(database: Database[Doc], user_id: str) -> int:
    """Delete the user's Idempotency-Key records (their stored answers hold the user's labels
    and texts); returns how many. A request still running for the user finds its record gone
    and stores no answer."""
    return int(database[dbm.IDEMPOTENCY].delete_many({"userId": user_id}).deleted_count)


def scrub(
    database: Database[Doc],
    user_id: str,
    now: dt.datetime,
    *,
    planned_before: dt.datetime | None = None,
) -> tuple[int, int, str]:
    """End the user's pending and missed messages ``cancelled`` "user erased" (nothing pending
    stays, nothing missed can be replayed) and anonymise all of them: the user id becomes a
    random ``erased-...`` id (one per sweep, unlinkable) and the push's text, data, label,
    token and zone are removed. ``planned_before``: only messages planned up to then. Returns
    (ended, anonymised, the pseudonym)."""
    messages = database[dbm.MESSAGES]
    mine: Doc = {"userId": user_id}
    if planned_before is not None:
        mine["plannedAt"] = {"$lte": planned_before}
    ended = messages.update_many(
        {**mine, "status": {"$in": [Status.PENDING.value, Status.IS_MISSED.value]}},
        {"$set": terminal_update(Status.CANCELLED, ERASED, now)},
    ).modified_count
    pseudonym, blank = _anonymous(now)
    anonymised = messages.update_many(mine, {"$set": blank}).modified_count
    return ended, anonymised, pseudonym


def scrub_ids(database: Database[Doc], ids: list[str], now: dt.datetime) -> tuple[int, str]:
    """``scrub`` for these messages of one user only (by id, through the ``_id`` index): those
    still pending or missed end ``cancelled`` "user erased", all are anonymised. Returns (ended,
    the pseudonym)."""
    pseudonym, blank = _anonymous(now)
    if not ids:
        return 0, pseudonym
    messages = database[dbm.MESSAGES]
    ends = [
        end(i, Status.CANCELLED, ERASED, now, expect=was)
        for i in ids
        for was in (Status.PENDING, Status.IS_MISSED)
    ]
    ended = messages.bulk_write(ends, ordered=False).modified_count
    messages.bulk_write([UpdateOne({"_id": i}, {"$set": blank}) for i in ids], ordered=False)
    return ended, pseudonym


def _anonymous(now: dt.datetime) -> tuple[str, Doc]:
    """A new pseudonym (one per sweep, unlinkable) and the fields that anonymise a message."""
    pseudonym = "erased-" + uuid.uuid4().hex[:16]
    return pseudonym, {**dict.fromkeys(SCRUBBED, None), "userId": pseudonym, "erasedAt": now}


def missing(database: Database[Doc], user_ids: Collection[str]) -> set[str]:
    """Which of these users no longer exist (lookups by id, ``LOOKUP`` at a time)."""
    ids = {u for u in user_ids if isinstance(u, str)}
    return ids - incarnations(database, ids).keys()


def same_user(read: Any, found: Any) -> bool:
    """Whether a user's ``createdAt`` as a change read (or wrote) it and as found later are the
    same user's: the database keeps milliseconds, a document written from Python holds
    microseconds; a naive instant is UTC."""
    if isinstance(read, dt.datetime) and isinstance(found, dt.datetime):
        return _ms(read) == _ms(found)
    return bool(read == found)


def _ms(at: dt.datetime) -> dt.datetime:
    at = at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)
    return at.astimezone(dt.UTC).replace(microsecond=at.microsecond // 1000 * 1000)


def incarnations_of(users: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The ``createdAt`` of user documents as a change or a planning read them: which user each
    id held then (``gone`` compares it with ``incarnations`` after an insert)."""
    return {u: d.get("createdAt") for u, d in users.items()}


def gone(users: Collection[str], read: Mapping[str, Any], found: Mapping[str, Any]) -> set[str]:
    """Of ``users``: those not ``found`` now, or found as another user than ``read`` (erased and
    created again under the same id since; ``same_user``). A user ``read`` does not hold is
    judged by presence alone."""
    return {u for u in users if u not in found or (u in read and not same_user(read[u], found[u]))}


def incarnations(database: Database[Doc], user_ids: Collection[str]) -> dict[str, Any]:
    """Those of these users that exist, each with its ``createdAt``: which user holds the id
    now. A user erased and created again under the same id is another one, with a later
    ``createdAt``: a change that read the first compares (``ErasureWriter.undo_if_erased``).
    Lookups by id, ``LOOKUP`` at a time."""
    ids = sorted(u for u in user_ids if isinstance(u, str))
    found: dict[str, Any] = {}
    for i in range(0, len(ids), LOOKUP):
        part = ids[i : i + LOOKUP]
        for d in database[dbm.USERS].find({"_id": {"$in": part}}, {"createdAt": 1}):
            found[d["_id"]] = d.get("createdAt")
    return found


def planned_from(
    database: Database[Doc], users: Collection[str], field: str, values: Collection[str]
) -> dict[str, list[Any]]:
    """The ids of the messages of these users whose ``field`` (``notificationTokenId`` or
    ``reminderId``) is one of ``values``, by user."""
    flt = {"userId": {"$in": sorted(users)}, field: {"$in": sorted(values)}}
    ids: dict[str, list[Any]] = {}
    for d in database[dbm.MESSAGES].find(flt, {"userId": 1}):
        ids.setdefault(str(d["userId"]), []).append(d["_id"])
    return ids
