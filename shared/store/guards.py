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

from shared.domain.messages import Doc
from shared.store.abc import Guard
from shared.store.mongo.guards import MongoGuards

# The functions below are the MongoDB adapter (``shared.store.mongo.guards``) by the names and
# signatures callers outside the consumer still use (creator/janitor, shared/store/replays).


def take_guards(
    database: Database[Doc], ids: list[str], owner: str, now: dt.datetime, wakeup: str | None = None
) -> set[str]:
    """Insert send guards; return the ids this owner got (the others were already taken)."""
    return MongoGuards(database).take(ids, owner, now, wakeup)


def maybe_sent(database: Database[Doc], owner: str) -> set[str]:
    """Messages a consumer had started an Expo request for and has no merged outcome of."""
    return MongoGuards(database).maybe_sent(owner)


def holder(database: Database[Doc], message_id: str) -> Doc | None:
    """The guard of ``message_id`` (who holds it, since when), or ``None``."""
    g = MongoGuards(database).holder(message_id)
    if g is None:
        return None
    return {"_id": g.id, "owner": g.owner, "at": g.at, "wakeup": g.wakeup}


def in_attempt(database: Database[Doc], owner: object, message_id: str) -> bool:
    """Whether ``owner`` recorded an attempt (a request that may have left) for the message."""
    return MongoGuards(database).in_attempt(owner, message_id)


def take_over(
    database: Database[Doc], guard: Guard, owner: str, now: dt.datetime, wakeup: str
) -> bool:
    """Move ``guard`` to ``owner`` if nobody moved it meanwhile (compare-and-set on holder+time)."""
    return MongoGuards(database).take_over(guard, owner, now, wakeup)


def release(database: Database[Doc], ids: list[str], owner: str) -> None:
    """Give back ``owner``'s guards of ``ids`` (only for messages that certainly never left)."""
    MongoGuards(database).release(ids, owner)


class Fenced(Exception):
    """This consumer was fenced by a takeover: it must send nothing more, and stop."""


def fence(database: Database[Doc], holder: str, by: str, now: dt.datetime) -> None:
    """Forbid ``holder`` to start any request from now on (before taking over its guards)."""
    MongoGuards(database).fence(holder, by, now)


def fenced_by(database: Database[Doc], consumer: str) -> str | None:
    """Who fenced ``consumer`` (``None``: nobody; it may send)."""
    return MongoGuards(database).fenced_by(consumer)
