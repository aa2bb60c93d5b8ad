"""Which of a wake-up's items may still go: the grace rule, the user's intent, the daily cap.

Asked twice per item: at preparation (the lead time before the due instant) and again just
before sending, when the daily cap is also reserved. Only users in the intent-change log since
the wake-up was planned are read in full; the others are judged from the wake-up's snapshot.

An item whose user document (or snapshot) cannot be judged ends ``failed`` with the problem as
its reason and is reported (``shared.metrics.bad_document``); the other items of the wake-up go
on, and its guard ends with it: nothing is left guarded and pending.
"""

from __future__ import annotations

import datetime as dt
import logging

from shared import metrics
from shared.domain import intent
from shared.domain.messages import Status, missed_reason, past_grace
from shared.store import intent as stored_intent
from shared.store.abc import ConsumerStores
from shared.wire import Item

log = logging.getLogger("consumer.worker")

End = tuple[Item, Status, str]  # an item, its terminal status, the reason


def judge(
    stores: ConsumerStores,
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
    users, reminders, tokens = (
        stored_intent.current_of(stores.current, stores.tokens, full) if full else ({}, {}, {})
    )
    caps: dict[str, int | None] = {}
    reported: set[tuple[str, str]] = set()
    for it in items:
        if past_grace(it.due_ms, now_ms, grace_s):
            ends.append((it, Status.IS_MISSED, missed_reason(now_ms - it.due_ms, grace_s)))
            continue
        if it.user in changed:
            v = intent.verdict(
                it,
                category,
                changed=True,
                user=users.get(it.user),
                reminder=reminders.get(it.reminder),
                token=tokens.get(it.token_id),
            )
        else:
            v = intent.verdict(it, category, changed=False)
        reason, caps[it.id] = v.reason, v.cap
        if v.bad is not None:
            if (v.bad.kind, v.bad.id) not in reported:
                reported.add((v.bad.kind, v.bad.id))
                metrics.bad_document(log, "consumer", v.bad)
            ends.append((it, Status.FAILED, f"bad document: {v.bad.describe()}"))
        elif reason:
            ends.append((it, Status.CANCELLED, reason))
        else:
            keep.append(it)
    if reserve_caps and any(caps.get(i.id) for i in keep):
        over = stored_intent.reserve_caps(stores.counters, keep, caps)
        ends += [(i, Status.CANCELLED, over[i.id]) for i in keep if i.id in over]
        keep = [i for i in keep if i.id not in over]
    return ends, keep
