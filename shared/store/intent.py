"""Reading and reserving what the intent check needs: the change log, current documents, caps.

The consumer trusts a wake-up's snapshot unless the user is in the intent-change log since the
wake-up was planned (one index range, usually empty); then it loads the user's current
documents here and judges them with ``shared.domain.intent``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping

from pymongo import UpdateOne
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from shared.domain.messages import Doc
from shared.store import db as dbm
from shared.wire import Item

# Clocks of creators and management processes may differ a little from ours.
CHANGE_SKEW = dt.timedelta(seconds=30)


def record_changes(
    database: Database[Doc], user_ids: Iterable[str], now: dt.datetime, *, erased: bool = False
) -> None:
    """Stamp the intent-change log so consumers recheck these users in full; ``erased``: the
    users are being erased (``erasedAt``, kept by later stamps: ``erased_since``).

    One write for any number of users: each write costs the server here a commit (about 10 ms
    with its log synced on commit), so a batch of users is stamped in one bulk write."""
    sets = {"at": now, "erasedAt": now} if erased else {"at": now}
    ops = [UpdateOne({"_id": uid}, {"$set": sets}, upsert=True) for uid in sorted(set(user_ids))]
    if ops:
        database[dbm.CHANGES].bulk_write(ops, ordered=False)


def changed_users(database: Database[Doc], since: dt.datetime) -> set[str]:
    """Users whose intent changed at or after ``since`` (one index range, usually empty); an
    entry whose id is not a string (written by hand: no user has one) is left out."""
    cur = database[dbm.CHANGES].find({"at": {"$gte": since - CHANGE_SKEW}}, {"_id": 1})
    return {d["_id"] for d in cur if isinstance(d["_id"], str)}


def erased_since(
    database: Database[Doc], user_ids: Collection[str], since: dt.datetime
) -> set[str]:
    """Which of these users (from ``changed_users``) were erased at or after ``since``, whether
    or not they exist again (a user created again under the same id): by ``_id``."""
    if not user_ids:
        return set()
    flt = {"_id": {"$in": sorted(user_ids)}, "erasedAt": {"$gte": since - CHANGE_SKEW}}
    return {str(d["_id"]) for d in database[dbm.CHANGES].find(flt, {"_id": 1})}


def load_current(
    database: Database[Doc], items: list[Item]
) -> tuple[dict[str, Doc], dict[str, Doc], dict[str, Doc]]:
    """Users, reminders and tokens of these (few) items, by id."""

    def by_id(coll: str, ids: set[str]) -> dict[str, Doc]:
        if not ids:
            return {}
        return {d["_id"]: d for d in database[coll].find({"_id": {"$in": sorted(ids)}})}

    return (
        by_id(dbm.USERS, {i.user for i in items}),
        by_id(dbm.REMINDERS, {i.reminder for i in items}),
        by_id(dbm.TOKENS, {i.token_id for i in items}),
    )


def daily_cap_reasons(
    database: Database[Doc], items: list[Item], caps: Mapping[str, int | None]
) -> dict[str, str]:
    """Reserve the daily cap for capped users; return the ids that are over it, with reasons.

    The counter is incremented for what will be sent (a reservation), so two batches for the
    same user cannot both pass; failed sends give their reservation back (see the recorder).
    """
    out: dict[str, str] = {}
    by_key: dict[str, list[Item]] = {}
    for it in items:
        if caps.get(it.id):
            by_key.setdefault(cap_key(it.user, it.local_date), []).append(it)
    for key, its in by_key.items():
        cap = int(caps[its[0].id] or 0)
        allowed = _reserve(database, key, its[0].user, cap, len(its))
        for it in its[allowed:]:
            out[it.id] = f"daily cap of {cap} reached for {it.local_date}"
    return out


def cap_key(user_id: str, local_date: str) -> str:
    """The ``_id`` of a user's daily-cap counter for one local date."""
    return f"{user_id}:{local_date}"


def _reserve(database: Database[Doc], key: str, user_id: str, cap: int, n: int) -> int:
    """Take up to ``n`` of the room left under ``cap`` on the counter ``key``; how many it took.

    Each try is one conditional increment by ``_id``: it takes ``want`` only if that much room
    is left, so no interleaving of consumers ever reserves past the cap. Not a
    find_one_and_update: the server here reads every counter of every day for one (1.4 to 1.9 s
    at 200,000 documents), on the send path. The counter carries its user (an erasure deletes
    by it) and when it was made: the index ``counters_expire`` drops it 8 days later (a local
    date lasts at most 50 h; late refunds come within minutes)."""
    counters = database[dbm.COUNTERS]
    want = min(n, cap)
    for _ in range(RESERVE_TRIES):
        if want <= 0:
            break
        try:
            counters.update_one(
                {"_id": key, "count": {"$lte": cap - want}},
                {
                    "$inc": {"count": want},
                    "$setOnInsert": {"userId": user_id, "at": dt.datetime.now(dt.UTC)},
                },
                upsert=True,
            )
            return want
        except DuplicateKeyError:
            # The counter exists with less room than ``want``, or another consumer made it
            # just now (its upsert won): ask again with the room it has.
            pass
        doc = counters.find_one({"_id": key}, {"count": 1}) or {}
        want = min(want, cap - int(doc.get("count", 0)))
    return 0


# Each failed try saw another reservation land in between; past this many, the push is held
# back as over the cap rather than waiting on a counter that busy.
RESERVE_TRIES = 8


def erase_counters(database: Database[Doc], user_id: str) -> int:
    """Delete the user's daily-cap counters (an erasure); how many.

    By their ``userId`` (an index). Counters made before they carried it are given theirs
    first, from their ``_id``: found through the same index (``userId: null``), so once they
    are done the look finds nothing, and not by an ``_id`` prefix, which reads every counter
    here."""
    counters = database[dbm.COUNTERS]
    now = dt.datetime.now(dt.UTC)
    legacy: list[UpdateOne] = []
    for d in counters.find({"userId": None}, {"_id": 1}):
        user = str(d["_id"]).rpartition(":")[0]
        legacy.append(
            UpdateOne({"_id": d["_id"], "userId": None}, {"$set": {"userId": user, "at": now}})
        )
        if len(legacy) == LEGACY_CHUNK:
            counters.bulk_write(legacy, ordered=False)
            legacy = []
    if legacy:
        counters.bulk_write(legacy, ordered=False)
    return counters.delete_many({"userId": user_id}).deleted_count


LEGACY_CHUNK = 1000  # counters given their user per write (the first erasure after an upgrade)
