"""Recheck a user's intent at send time: every reason a planned push must not go out. Pure.

Decisions are functions of documents and the item's snapshot; ``shared.store.intent`` loads the
documents (only for users who changed since planning: see the intent-change log) and reserves
the daily cap. The planner asks ``user_accepts`` before it makes a message at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from zoneinfo import ZoneInfo

from shared.wire import Item


def user_accepts(user: Mapping[str, Any], category: str) -> bool:
    """Whether the user's preferences allow this category at all (quiet hours are checked later)."""
    prefs = user.get("prefs") or {}
    if not prefs.get("enabled", True):
        return False
    return bool((prefs.get("categories") or {}).get(category, True))


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
