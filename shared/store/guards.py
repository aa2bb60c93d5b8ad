"""Send guards and attempt records: the rule that no occurrence is pushed twice.

A guard is a document in ``notification_sends`` keyed by the message id: whoever inserts it
first (a consumer, the janitor, a takeover) is the only one who may send or end that message.
Attempt records (``send_attempts``, written by ``consumer.attempts``) say which guarded messages
may already have left for Expo; a guard is never released for those.

A takeover decides from the holder's attempt records, so the holder must not start a request
the takeover could not see. Fencing orders the two: the taker first fences the holder
(``fence``), then reads its attempt records; the holder writes its attempt record first, then
checks its fence (``fenced_by``) and sends only if it is not fenced. Whatever the interleaving,
either the taker sees the attempt (and ends the message "outcome unknown") or the holder sees
the fence (and sends nothing): never both sending. A fenced consumer stops; its restart is a
new consumer with a new id.
"""

from __future__ import annotations

import datetime as dt

from pymongo.database import Database
from pymongo.errors import BulkWriteError

from shared.domain.messages import Doc
from shared.store import db as dbm


def take_guards(
    database: Database[Doc], ids: list[str], owner: str, now: dt.datetime, wakeup: str | None = None
) -> set[str]:
    """Insert send guards; return the ids this owner got (the others were already taken)."""
    if not ids:
        return set()
    docs = [{"_id": i, "owner": owner, "wakeup": wakeup, "at": now} for i in ids]
    try:
        dbm.critical(database, dbm.SENDS).insert_many(docs, ordered=False)
        return set(ids)
    except BulkWriteError as exc:
        lost = set()
        for err in exc.details.get("writeErrors", []):
            if err.get("code") != 11000:
                raise
            lost.add(docs[err["index"]]["_id"])
        return set(ids) - lost


def maybe_sent(database: Database[Doc], owner: str) -> set[str]:
    """Messages a consumer had started an Expo request for and has no merged outcome of."""
    return {
        i for d in database[dbm.ATTEMPTS].find({"consumer": owner}, {"ids": 1}) for i in d["ids"]
    }


def holder(database: Database[Doc], message_id: str) -> Doc | None:
    """The guard of ``message_id`` (who holds it, since when), or ``None``."""
    return dbm.critical(database, dbm.SENDS).find_one({"_id": message_id})


def in_attempt(database: Database[Doc], owner: object, message_id: str) -> bool:
    """Whether ``owner`` recorded an attempt (a request that may have left) for the message."""
    found = database[dbm.ATTEMPTS].find_one({"consumer": owner, "ids": message_id}, {"_id": 1})
    return found is not None


def take_over(
    database: Database[Doc], guard: Doc, owner: str, now: dt.datetime, wakeup: str
) -> bool:
    """Move ``guard`` to ``owner`` if nobody moved it meanwhile (compare-and-set on holder+time)."""
    r = dbm.critical(database, dbm.SENDS).update_one(
        {"_id": guard["_id"], "owner": guard.get("owner"), "at": guard.get("at")},
        {
            "$set": {
                "owner": owner,
                "at": now,
                "wakeup": wakeup,
                "takenOverFrom": guard.get("owner"),
            }
        },
    )
    return bool(r.modified_count)


def release(database: Database[Doc], ids: list[str], owner: str) -> None:
    """Give back ``owner``'s guards of ``ids`` (only for messages that certainly never left)."""
    dbm.critical(database, dbm.SENDS).delete_many({"_id": {"$in": ids}, "owner": owner})


class Fenced(Exception):
    """This consumer was fenced by a takeover: it must send nothing more, and stop."""


def fence(database: Database[Doc], holder: str, by: str, now: dt.datetime) -> None:
    """Forbid ``holder`` to start any request from now on (before taking over its guards)."""
    dbm.critical(database, dbm.FENCES).update_one(
        {"_id": holder}, {"$set": {"by": by, "at": now}}, upsert=True
    )


def fenced_by(database: Database[Doc], consumer: str) -> str | None:
    """Who fenced ``consumer`` (``None``: nobody; it may send)."""
    doc = dbm.critical(database, dbm.FENCES).find_one({"_id": consumer}, {"by": 1})
    return None if doc is None else str(doc.get("by"))
