"""Recheck a user's intent at send time: every reason a planned push must not go out.

Cheap path: the snapshot in the wake-up plus one index range on ``intent_changes`` per batch;
only users who changed since the batch was planned are read in full (user, reminder, token).
Decisions are pure functions of documents and ``now``; the loaders are the only I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any
from zoneinfo import ZoneInfo

from pymongo.database import Database

from shared import db as dbm
from shared.wire import Item

Doc = dict[str, Any]
# Clocks of creators and management processes may differ a little from ours.
CHANGE_SKEW = dt.timedelta(seconds=30)


def changed_users(database: Database[Doc], since: dt.datetime) -> set[str]:
    """Users whose intent changed at or after ``since`` (one index range, usually empty)."""
    cur = database[dbm.CHANGES].find({"at": {"$gte": since - CHANGE_SKEW}}, {"_id": 1})
    return {d["_id"] for d in cur}


def in_quiet_hours(item: Item, quiet: Iterable[str] | None) -> bool:
    """Whether the due instant falls in the user's quiet hours (local time, may wrap midnight)."""
    if not quiet:
        return False
    start, end = list(quiet)
    local = item.due.astimezone(ZoneInfo(item.tz)).strftime("%H:%M")
    if start <= end:
        return start <= local < end
    return local >= start or local < end


def snapshot_reason(item: Item) -> str | None:
    """Why not to send, judged from the snapshot alone (user unchanged since planning)."""
    if in_quiet_hours(item, item.quiet):
        return f"quiet hours {item.quiet[0]}-{item.quiet[1]} ({item.tz})" if item.quiet else None
    return None


def full_reason(
    item: Item,
    category: str,
    user: Mapping[str, Any] | None,
    reminder: Mapping[str, Any] | None,
    token: Mapping[str, Any] | None,
) -> str | None:
    """Why not to send, judged from the current documents (user changed since planning)."""
    if user is None:
        return "user no longer exists"
    prefs = user.get("prefs") or {}
    if not prefs.get("enabled", True):
        return "user turned notifications off"
    if not (prefs.get("categories") or {}).get(category, True):
        return f"user turned off {category} notifications"
    if reminder is None or reminder.get("isDeleted"):
        return "reminder removed"
    if not reminder.get("active", True):
        return "reminder paused"
    if int(reminder.get("version", 1)) != item.version:
        return "reminder changed since planning (moved or edited)"
    if user.get("timezone") != item.tz:
        return f"user time zone changed to {user.get('timezone')}"
    if token is None or not token.get("isActive"):
        why = (token or {}).get("deactivationReason") or "unknown"
        return f"token no longer active ({why})"
    quiet = prefs.get("quietHours")
    if quiet and in_quiet_hours(item, quiet):
        return f"quiet hours {quiet[0]}-{quiet[1]} ({item.tz})"
    return None


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
