"""Recheck a user's intent at send time: every reason a planned push must not go out. Pure.

Decisions are functions of documents and the item's snapshot; ``shared.store.intent`` loads the
documents (only for users who changed since planning: see the intent-change log) and reserves
the daily cap. The planner asks ``user_accepts`` before it makes a message at all.

``verdict`` is the whole question for one item, and it never raises on what it reads: a user
document, or a snapshot, that cannot be judged (quiet hours that are not two times of day, a
zone that does not exist, a daily cap that is not a number) comes back as a ``BadDocument``, so
the consumer fails that one message with the reason and goes on with the rest of the wake-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from shared.domain.localtime import LocalTimeError, validate_timezone
from shared.domain.validation import (
    BadDocument,
    daily_cap_problem,
    doc_id,
    quiet_hours_problem,
    user_problem,
)
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
    gone = reminder_gone(reminder)
    if gone is not None or reminder is None:
        return gone
    if int(reminder.get("version", 1)) != item.version:
        return REMINDER_CHANGED
    if user.get("timezone") != item.tz:
        return f"user time zone changed to {user.get('timezone')}"
    if token is None or not token.get("isActive"):
        return token_off(token)
    quiet = prefs.get("quietHours")
    if quiet and in_quiet_hours(item, quiet):
        return f"quiet hours {quiet[0]}-{quiet[1]} ({item.tz})"
    return None


REMINDER_CHANGED = "reminder changed since planning (moved or edited)"


def reminder_gone(reminder: Mapping[str, Any] | None) -> str | None:
    """Why nothing of ``reminder`` may go any more (removed, or paused), or ``None``."""
    if reminder is None or reminder.get("isDeleted"):
        return "reminder removed"
    if not reminder.get("active", True):
        return "reminder paused"
    return None


def token_off(token: Mapping[str, Any] | None) -> str:
    """The reason a message to a registration no longer active ends with."""
    why = (token or {}).get("deactivationReason") or "unknown"
    return f"token no longer active ({why})"


class Verdict(NamedTuple):
    """One item's intent check: why not to send (``None``: it may go), the daily cap to reserve,
    or the document that could not be judged (the message fails with it)."""

    reason: str | None
    cap: int | None = None
    bad: BadDocument | None = None


def verdict(
    item: Item,
    category: str,
    *,
    changed: bool,
    user: Mapping[str, Any] | None = None,
    reminder: Mapping[str, Any] | None = None,
    token: Mapping[str, Any] | None = None,
) -> Verdict:
    """``full_reason`` on the current documents for a user who ``changed`` since planning, else
    ``snapshot_reason`` on the item's snapshot; never raises on bad data (see the module)."""
    if changed:
        if user is not None and (problem := user_problem(user)):
            return Verdict(None, bad=BadDocument("user", doc_id(user), problem))
        try:
            return Verdict(
                full_reason(item, category, user, reminder, token), (user or {}).get("dailyCap")
            )
        except (ValueError, TypeError, LookupError, AttributeError) as exc:
            problem = f"intent check failed on the current documents: {type(exc).__name__}: {exc}"
            return Verdict(None, bad=BadDocument("message", item.id, problem))
    problem = _snapshot_problem(item)
    if problem is not None:
        return Verdict(None, bad=BadDocument("message", item.id, f"snapshot {problem}"))
    return Verdict(snapshot_reason(item), item.cap)


def _snapshot_problem(item: Item) -> str | None:
    try:
        validate_timezone(item.tz)
    except LocalTimeError:
        return f"time zone {item.tz!r} is not an IANA time zone"
    if problem := quiet_hours_problem(item.quiet):
        return f"quiet hours {item.quiet!r} {problem}"
    if item.cap is not None and (problem := daily_cap_problem(item.cap)):
        return f"daily cap {item.cap!r} {problem}"
    return None
