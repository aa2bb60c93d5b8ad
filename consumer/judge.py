"""Which of a wake-up's items may still go: the grace rule, the user's intent, the daily cap.

Asked twice per item: at preparation (the lead time before the due instant) and again just
before sending, when the daily cap is also reserved. Only users in the intent-change log since
the wake-up was planned are read in full; the others are judged from the wake-up's snapshot.
"""

from __future__ import annotations

import datetime as dt

from pymongo.database import Database

from shared.domain import intent
from shared.domain.messages import Doc, Status, missed_reason, past_grace
from shared.store import intent as stored_intent
from shared.wire import Item

End = tuple[Item, Status, str]  # an item, its terminal status, the reason


def judge(
    database: Database[Doc],
    category: str,
    grace_s: float,
    items: list[Item],
    now: dt.datetime,
    changed: set[str],
    *,
    reserve_caps: bool = True,
) -> tuple[list[End], list[Item]]:
    """Split items into (terminal decisions, items to send).

    The daily cap is reserved only with ``reserve_caps`` (the final check just before
    sending): reserving at preparation too would count each message twice.
    """
    now_ms = int(now.timestamp() * 1000)
    ends: list[End] = []
    keep: list[Item] = []
    full = [i for i in items if i.user in changed]
    users, reminders, tokens = stored_intent.load_current(database, full) if full else ({}, {}, {})
    caps: dict[str, int | None] = {}
    for it in items:
        if past_grace(it.due_ms, now_ms, grace_s):
            ends.append((it, Status.IS_MISSED, missed_reason(now_ms - it.due_ms, grace_s)))
            continue
        if it.user in changed:
            user = users.get(it.user)
            reason = intent.full_reason(
                it, category, user, reminders.get(it.reminder), tokens.get(it.token_id)
            )
            caps[it.id] = (user or {}).get("dailyCap")
        else:
            reason = intent.snapshot_reason(it)
            caps[it.id] = it.cap
        if reason:
            ends.append((it, Status.CANCELLED, reason))
        else:
            keep.append(it)
    if reserve_caps and any(caps.get(i.id) for i in keep):
        over = stored_intent.daily_cap_reasons(database, keep, caps)
        ends += [(i, Status.CANCELLED, over[i.id]) for i in keep if i.id in over]
        keep = [i for i in keep if i.id not in over]
    return ends, keep
