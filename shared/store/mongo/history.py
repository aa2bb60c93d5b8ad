"""A user's messages read by due instant without reading their whole history (on MongoDB).

The server here reads a whole index range before it applies a sort's limit, and reads a user's
every message when the filter holds one field beside ``{userId, scheduledAt}``; so these reads
go forward or back from an instant in windows that grow (``ranges_forward``, ``ranges_back``),
each exactly ``{userId, scheduledAt: range}``, and stop once they have their answer. Used by
the HTTP API, the console and ``tzpush messages list``, and by ``shared.store.mongo.reads``.
Plain MongoDB stops an index scan at a sort's limit when the sort follows the index, and reads
only the range when a field beside the index's is filtered on the documents fetched: there the
windows only add a round trip or two.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator

from pymongo.database import Database

from shared.domain.messages import Doc
from shared.domain.plan import MAX_CATCH_UP
from shared.instants import EPOCH, as_time
from shared.store import db as dbm


def messages_page(
    database: Database[Doc],
    user_id: str,
    *,
    limit: int,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    status: str | None = None,
    after: tuple[dt.datetime, str] | None = None,
) -> tuple[list[Doc], bool]:
    """A page of the user's messages due in ``[start, end)`` by (due instant, id), the first
    after the cursor ``after``; and whether more follow.

    Read forward from the cursor (or ``start``, or the user's creation: ``BEFORE_CREATED``) a
    window at a time (``ranges_forward``), each window a range of the index ``(userId,
    scheduledAt)`` in its own order, ``limit + 1`` at a time; the messages that share the last
    instant read are read whole (one equality), so the order by id within an instant is made
    here, and what shares the cursor's instant up to its id is skipped here. A page of one
    status is one range (below): its cost follows the user's history on this server. Not a sort on
    ``(scheduledAt, _id)``: the index does not give it, so every message of the range was
    sorted before the first was returned. Not the cursor as an ``$or`` in the filter: the
    server here then reads every message ever planned (4.1 s at 200,000)."""
    since = start or EPOCH
    if after is not None and after[0] > since:
        since = after[0]
    user = database[dbm.USERS].find_one({"_id": user_id}, {"createdAt": 1})
    floor = None if user is None else _floor(user)
    if floor is not None and floor > since:  # nothing of theirs is due before
        since = floor
    base: Doc = {"userId": user_id}
    windows: Iterable[Doc] = ranges_forward(since, end)
    if status is not None:
        # One range from the cursor on, the status in the filter: with it the server reads the
        # user's every message whatever the range, so windows would read them again each, and
        # picking the status out here would carry them all over (3.5 s for a page of a status
        # none had, at 3,670 messages, against 121 ms this way).
        base["status"] = status
        windows = [{"$gte": since} if end is None else {"$gte": since, "$lt": end}]
    coll = database[dbm.MESSAGES]
    out: list[Doc] = []
    for window in windows:
        rng = window
        while True:
            batch = list(
                coll.find({**base, "scheduledAt": rng}).sort([("scheduledAt", 1)]).limit(limit + 1)
            )
            cut = len(batch) > limit  # the last instant read may go on past the limit
            if cut:
                last = batch[-1]["scheduledAt"]
                batch = [d for d in batch if d["scheduledAt"] != last]
                batch += list(coll.find({**base, "scheduledAt": last}))
            batch.sort(key=lambda d: (as_time(d.get("scheduledAt")) or since, str(d["_id"])))
            for d in batch:
                if (
                    after is not None
                    and ((as_time(d.get("scheduledAt")) or since), str(d["_id"])) <= after
                ):
                    continue
                out.append(d)
                if len(out) > limit:
                    return out[:limit], True
            if not cut:
                break
            rng = {"$gt": last, **({"$lt": window["$lt"]} if "$lt" in window else {})}
    return out, False


# A read of a user's messages goes from an instant forward or back in windows that grow
# (``ranges_forward``, ``ranges_back``) and stops once it has its answer: what is asked for is
# almost always in the first days, and the server here reads a whole index range before it
# applies a sort's limit, so one read of "everything before now" (or "after this cursor") cost
# a user's whole history (3,670 messages: a reminders page 244 ms, the console's user page
# 697 ms). Offsets from where the read starts; past the last, the rest in one range.
BACK = tuple(dt.timedelta(days=4**k) for k in range(8))  # 1 day ... 44 years
# No message of a reminder (so of a user) is due earlier than this before it was created: a
# pass plans back at most MAX_CATCH_UP, and a day covers a pass's length and the hosts' clocks.
BEFORE_CREATED = MAX_CATCH_UP + dt.timedelta(days=1)


def _shifted(t: dt.datetime, by: dt.timedelta) -> dt.datetime | None:
    try:
        return t + by
    except OverflowError:  # past year 9999 (an instant as given) or before year 1
        return None


def ranges_forward(lo: dt.datetime, end: dt.datetime | None) -> Iterator[Doc]:
    """``scheduledAt`` conditions that cover ``[lo, end)`` (``end`` None: on without end) from
    ``lo`` on, oldest first: ``[lo, lo + 1 d)``, ``[lo + 1 d, lo + 4 d)``, ... and the rest."""
    bottom = lo
    for span in BACK:
        top = _shifted(lo, span)
        if top is None or (end is not None and top >= end):
            break
        yield {"$gte": bottom, "$lt": top}
        bottom = top
    yield {"$gte": bottom} if end is None else {"$gte": bottom, "$lt": end}


def ranges_back(hi: dt.datetime) -> Iterator[Doc]:
    """``scheduledAt`` conditions that cover ``(-inf, hi]`` from ``hi`` back, newest first:
    ``(hi - 1 d, hi]``, ``(hi - 4 d, hi - 1 d]``, ... and the rest."""
    top: Doc = {"$lte": hi}
    for span in BACK:
        lo = _shifted(hi, -span)
        if lo is None:
            break
        yield {**top, "$gt": lo}
        top = {"$lte": lo}
    yield top


def last_occurrences(
    database: Database[Doc], user_id: str, reminders: Iterable[Doc], now: dt.datetime
) -> dict[str, Doc]:
    """The latest message due by ``now`` of each of ``reminders`` (their documents), by id.

    Read back from now a window at a time (``ranges_back``), the reminders picked out here: a
    ``reminderId`` in the filter made the server read the user's every message. A reminder is
    no longer looked for in windows that end before it was created (``BEFORE_CREATED``), so one
    that never sent costs its own lifetime, not the user's history."""
    floors = {str(r["_id"]): _floor(r) for r in reminders}
    out: dict[str, Doc] = {}
    for rng in ranges_back(now):
        wanted = {r for r, f in floors.items() if r not in out and (f is None or rng["$lte"] > f)}
        if not wanted:
            break
        cursor = database[dbm.MESSAGES].find(
            {"userId": user_id, "scheduledAt": rng},
            {"reminderId": 1, "scheduledAt": 1, "status": 1, "reason": 1},
        )
        for d in cursor:
            rid, at = d.get("reminderId"), as_time(d.get("scheduledAt"))
            if rid not in wanted or at is None:
                continue
            if rid not in out or at > out[rid]["scheduledAt"]:
                out[rid] = {**d, "scheduledAt": at}
    return out


def _floor(doc: Doc) -> dt.datetime | None:
    """Before this instant no message of ``doc`` (a reminder, a user) is due (None: unknown)."""
    created = as_time(doc.get("createdAt"))
    return None if created is None else _shifted(created, -BEFORE_CREATED)
