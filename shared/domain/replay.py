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
from shared.wire import Item


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
