"""Reading and reserving what the intent check needs: the change log, current documents, caps.

The consumer trusts a wake-up's snapshot unless the user is in the intent-change log since the
wake-up was planned (one index range, usually empty); then it loads the user's current
documents here and judges them with ``shared.domain.intent``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from pymongo import UpdateOne
from pymongo.database import Database

from shared.domain.messages import Doc
from shared.store import db as dbm
from shared.wire import Item

# Clocks of creators and management processes may differ a little from ours.
CHANGE_SKEW = dt.timedelta(seconds=30)


def record_changes(database: Database[Doc], user_ids: Iterable[str], now: dt.datetime) -> None:
    """Stamp the intent-change log so consumers recheck these users in full.

    One write for any number of users: each write costs the server here a commit (about 10 ms
    with its log synced on commit), so a batch of users is stamped in one bulk write."""
    ops = [
        UpdateOne({"_id": uid}, {"$set": {"at": now}}, upsert=True) for uid in sorted(set(user_ids))
    ]
    if ops:
        database[dbm.CHANGES].bulk_write(ops, ordered=False)


def changed_users(database: Database[Doc], since: dt.datetime) -> set[str]:
    """Users whose intent changed at or after ``since`` (one index range, usually empty); an
    entry whose id is not a string (written by hand: no user has one) is left out."""
    cur = database[dbm.CHANGES].find({"at": {"$gte": since - CHANGE_SKEW}}, {"_id": 1})
    return {d["_id"] for d in cur if isinstance(d["_id"], str)}


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
            by_key.setdefault(f"{it.user}:{it.local_date}", []).append(it)
    for key, its in by_key.items():
        cap = int(caps[its[0].id] or 0)
        doc = database[dbm.COUNTERS].find_one_and_update(
            {"_id": key},
            {"$inc": {"count": len(its)}},
            upsert=True,
            return_document=True,
        )
        after = int((doc or {}).get("count", len(its)))
        before = after - len(its)
        allowed = max(0, cap - before)
        over = its[allowed:]
        if over:
            database[dbm.COUNTERS].update_one({"_id": key}, {"$inc": {"count": -len(over)}})
            for it in over:
                out[it.id] = f"daily cap of {cap} reached for {it.local_date}"
    return out
