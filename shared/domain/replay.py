"""How a replay judges a missed message: at the replay's own instant, in the user's zone. Pure.

A replay sends now, not at the original due instant, so "may it go?" is asked about now: the
user's quiet hours are those of the user's local time *now* (judging the original due instant
could push at 3 a.m.), and the daily cap counts against the user's local day *now* (the day the
phone receives the push). Everything else (preferences, reminder, token, zone) is
``shared.domain.intent.full_reason`` as the consumer asks it for a changed user.

Quiet hours are not a reason to cancel here: they say "not at this hour", and the hour is the
operator's choice, not the message's. The message goes back to ``is_missed`` (``Verdict.LATER``)
so a replay outside the user's quiet hours can still send it. A consumer cancels a message that
is due in quiet hours because its instant never changes; a replay's does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection, Mapping
from enum import Enum
from typing import Any
from zoneinfo import ZoneInfo

from shared.domain import intent
from shared.domain.messages import Status, outcome_unknown
from shared.wire import Item

# How long a replay run may hold what it took before others may settle it. Taken per chunk of
# at most 500 messages: minutes of Expo requests even with retries. A run slower than this is
# fenced, never sent twice.
LEASE = dt.timedelta(minutes=15)
# Attempt records expire after 7 days (TTL index ``attempts_expire``): a message taken longer ago
# than this may have lost its record, so it counts as "may have left".
ATTEMPTS_KEPT = dt.timedelta(days=6)


class Verdict(Enum):
    SEND = "send"
    CANCEL = "cancel"  # the user does not want it any more: cancelled, with the reason
    LATER = "later"  # not now (quiet hours): back to is_missed, for a later replay


def at_replay(item: Item, now: dt.datetime, zone: str | None = None) -> Item:
    """The item as a replay at ``now`` sends it: due now, on the local day of now in ``zone``
    (the user's current zone; the snapshot's when not given), which the daily cap counts."""
    tz = ZoneInfo(zone or item.tz)
    return dataclasses.replace(
        item,
        due_ms=int(now.timestamp() * 1000),
        local_date=now.astimezone(tz).date().isoformat(),
    )


Current = tuple[Mapping[str, Any] | None, Mapping[str, Any] | None, Mapping[str, Any] | None]
"""The user's, the reminder's and the token's documents as they are now (``None``: gone)."""


def judge(
    item: Item, category: str, current: Current, now: dt.datetime
) -> tuple[Verdict, str | None]:
    """Whether a replay at ``now`` sends ``item``, and if not, why (a reason a person can read)."""
    user, reminder, token = current
    prefs = dict((user or {}).get("prefs") or {})
    quiet = prefs.pop("quietHours", None)
    without_quiet = None if user is None else {**user, "prefs": prefs}
    why = intent.full_reason(item, category, without_quiet, reminder, token)
    if why:
        return Verdict.CANCEL, why
    now_item = at_replay(item, now)  # the zone is the user's: full_reason refused any other
    if quiet and intent.in_quiet_hours(now_item, quiet):
        local = now.astimezone(ZoneInfo(item.tz)).strftime("%H:%M")
        return Verdict.LATER, f"quiet hours {quiet[0]}-{quiet[1]} ({item.tz}) at {local} local"
    return Verdict.SEND, None


def says_a_cause(doc: Mapping[str, Any], codes: Collection[str]) -> bool:
    """Whether a failed message's code, or its receipt's error, is one of ``codes``. A value
    that is not text (written by hand) is none of them."""
    code = doc.get("errorCode")
    receipt = doc.get("receipt")
    receipt = receipt if isinstance(receipt, dict) else {}
    error = receipt.get("error")
    return (isinstance(code, str) and code in codes) or (
        receipt.get("state") == "error" and isinstance(error, str) and error in codes
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Settlement:
    """How a message of a stopped replay run is settled: ``unknown``, it ends ``status``
    (``failed``) "outcome unknown"; else it goes back to ``status``, the status it was taken
    from, with ``reason`` saying why it was not sent."""

    unknown: bool
    status: Status
    reason: str


def settle_one(record: Mapping[str, Any], may_have_left: bool, now: dt.datetime) -> Settlement:
    """The settlement of a message whose ``replay`` record is ``record``: "outcome unknown"
    when it may have left (``may_have_left``: in an attempt record of its run or sender; or
    no run, or taken too long ago for its records to be kept), else back where it was taken
    from (``is_missed``, or ``failed``)."""
    run, at = record.get("run"), record.get("at")
    no_record = run is None or not isinstance(at, dt.datetime) or at < now - ATTEMPTS_KEPT
    if no_record or may_have_left:
        why = outcome_unknown(run or f"replay by {record.get('by')} (no attempt record)")
        return Settlement(True, Status.FAILED, why)
    origin = Status.FAILED if record.get("from") == Status.FAILED.value else Status.IS_MISSED
    return Settlement(False, origin, f"replay {run} stopped before sending it")
