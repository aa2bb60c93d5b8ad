"""Pure planning: reminders x tokens x occurrences -> message documents -> wake-ups. No I/O.

Message ids are deterministic, ``<reminderId>:<version>:<tokenId>:<YYYYMMDD>``, so planning the
same window twice (a second pass, a second creator, a crash and a retry) can only produce the same
documents, which the database refuses as duplicates.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shared.domain.intent import user_accepts
from shared.domain.localtime import occurrences_between, parse_hhmm
from shared.domain.messages import Doc, message_id, new_message
from shared.wire import Item, WakeUp

__all__ = ["Doc", "group_wakeups", "message_id", "plan_messages", "to_item", "user_accepts"]


def plan_messages(
    reminders: Iterable[Mapping[str, Any]],
    users: Mapping[str, Mapping[str, Any]],
    tokens_by_user: Mapping[str, Sequence[Mapping[str, Any]]],
    start: dt.datetime,
    end: dt.datetime,
    now: dt.datetime,
) -> list[Doc]:
    """Every pending message for occurrences with ``start <= at < end``, one per active token."""
    out: list[Doc] = []
    for r in reminders:
        if not r.get("active", True) or r.get("isDeleted"):
            continue
        user = users.get(r["userId"])
        tokens = tokens_by_user.get(r["userId"])
        if user is None or not tokens or not user_accepts(user, r["category"]):
            continue
        tz = user["timezone"]
        occs = occurrences_between(
            parse_hhmm(r["time"]),
            tz,
            start,
            end,
            offset_minutes=int(r.get("offsetMinutes") or 0),
            weekdays=r.get("weekdays"),
        )
        if not occs:
            continue
        for occ in occs:
            for tok in tokens:
                out.append(new_message(r, user, tok, occ.at, occ.local_date, now))
    return out


def to_item(doc: Mapping[str, Any]) -> Item:
    """The snapshot of a message document that travels in a wake-up."""
    return Item(
        id=doc["_id"],
        due_ms=int(doc["scheduledAt"].timestamp() * 1000),
        user=doc["userId"],
        reminder=doc["reminderId"],
        version=int(doc.get("reminderVersion", 1)),
        token_id=doc["notificationTokenId"],
        to=doc["token"],
        title=doc.get("title"),
        body=doc.get("body"),
        data=doc.get("data"),
        local_date=doc.get("localDate", ""),
        label=doc.get("label", ""),
        tz=doc.get("timezone", "UTC"),
        cap=doc.get("dailyCap"),
        quiet=doc.get("quietHours"),
    )


def group_wakeups(
    docs: Iterable[Mapping[str, Any]],
    *,
    size: int,
    window_s: float,
    planned_at: dt.datetime,
) -> list[WakeUp]:
    """Group messages by category and a window of due instants, at most ``size`` per wake-up.

    Grouping is deterministic (sorted by category, due instant, id), so re-arming the same set
    produces the same wake-ups.
    """
    ordered = sorted(docs, key=lambda d: (d["category"], d["scheduledAt"], d["_id"]))
    planned_ms = int(planned_at.timestamp() * 1000)
    window_ms = int(window_s * 1000)
    wakeups: list[WakeUp] = []
    cur: list[Item] = []
    cur_cat = ""

    def close() -> None:
        if cur:
            digest = hashlib.sha1("\n".join(i.id for i in cur).encode()).hexdigest()[:16]
            wid = f"{cur_cat}:{cur[0].due_ms}:{digest}"
            wakeups.append(WakeUp(wid, cur_cat, planned_ms, tuple(cur)))

    for d in ordered:
        item = to_item(d)
        if cur and (
            d["category"] != cur_cat or len(cur) >= size or item.due_ms - cur[0].due_ms > window_ms
        ):
            close()
            cur = []
        cur_cat = d["category"]
        cur.append(item)
    close()
    return wakeups
