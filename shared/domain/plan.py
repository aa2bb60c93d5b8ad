"""Pure planning: reminders x tokens x occurrences -> message documents -> wake-ups. No I/O.

Message ids are deterministic, ``<reminderId>:<version>:<tokenId>:<YYYYMMDD>``, so planning the
same window twice (a second pass, a second creator, a crash and a retry) can only produce the same
documents, which the database refuses as duplicates.

Reminders, users and tokens are documents someone else wrote. ``plan_checked`` asks the rules of
``shared.domain.validation`` about each before it relies on a field, skips what they refuse and
returns it with the reason, so one bad reminder (a zone that does not exist, ``8:00``, weekday
7, no label) costs its own occurrences, never the rest of the pass.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from shared.domain.intent import user_accepts
from shared.domain.localtime import occurrences_between, parse_hhmm
from shared.domain.messages import Doc, message_id, new_message
from shared.domain.validation import (
    BadDocument,
    doc_id,
    reminder_problem,
    token_problem,
    user_problem,
)
from shared.wire import Item, WakeUp

__all__ = [
    "BUCKETS",
    "BadDocument",
    "Doc",
    "Plan",
    "WakeupStream",
    "bucket_of",
    "group_sorted",
    "group_wakeups",
    "message_id",
    "owned_partitions",
    "partition_buckets",
    "partition_of",
    "plan_checked",
    "to_item",
    "user_accepts",
]


# A user's bucket: a stable hash of the user id, mod BUCKETS. Stored on the user's reminders,
# user document and tokens (field ``bucket``), so one index range reads a set of users with
# everything the planner needs of them. A partition is a contiguous range of buckets, so the
# number of partitions can change (up to BUCKETS) without rewriting a document.
BUCKETS = 4096
# How far back a pass re-creates occurrences that no pass planned (creator down). So no message
# of a reminder is due more than this (and a pass's length) before the reminder was created.
MAX_CATCH_UP = dt.timedelta(days=2)


def bucket_of(user_id: str) -> int:
    """The bucket of a user id: blake2b (stable across processes and versions, unlike Python's
    salted ``hash()``) of its UTF-8 bytes, mod ``BUCKETS``."""
    digest = hashlib.blake2b(user_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % BUCKETS


def partition_buckets(partition: int, partitions: int) -> tuple[int, int]:
    """The buckets ``[lo, hi)`` of one of ``partitions`` partitions (sizes differ by at most 1)."""
    if not 1 <= partitions <= BUCKETS or not 0 <= partition < partitions:
        raise ValueError(f"partition {partition} of {partitions} (1..{BUCKETS} partitions)")
    return -(-partition * BUCKETS // partitions), -(-(partition + 1) * BUCKETS // partitions)


def partition_of(bucket: int, partitions: int) -> int:
    """The partition that holds ``bucket`` (the inverse of ``partition_buckets``)."""
    return bucket * partitions // BUCKETS


def owned_partitions(me: str, live: Collection[str], partitions: int) -> set[int]:
    """The partitions creator ``me`` should hold when ``live`` creators are running: partition
    ``p`` goes to the ``p mod n``-th live creator in id order, so shares differ by at most one
    and every creator that sees the same live set computes the same assignment."""
    members = sorted(set(live) | {me})
    mine = members.index(me)
    return {p for p in range(partitions) if p % len(members) == mine}


class Plan(NamedTuple):
    """What ``plan_checked`` made, and the documents it skipped (each once, with why)."""

    messages: list[Doc]
    skipped: list[BadDocument]


def plan_checked(
    reminders: Iterable[Mapping[str, Any]],
    users: Mapping[str, Mapping[str, Any]],
    tokens_by_user: Mapping[str, Sequence[Mapping[str, Any]]],
    start: dt.datetime,
    end: dt.datetime,
    now: dt.datetime,
    *,
    categories: Collection[str] | None = None,
) -> Plan:
    """Every pending message for occurrences with ``start <= at < end``, one per active token,
    and the reminders, users and tokens skipped because a field cannot be used.

    ``categories``: the configured ones; a reminder in another is skipped (no queue, no
    consumer). A missing user, or one without tokens, is not a bad document: nothing to send.
    """
    out: list[Doc] = []
    skipped: dict[tuple[str, str], BadDocument] = {}
    checked_users: dict[str, bool] = {}

    def skip(kind: str, doc: object, problem: str) -> None:
        bad = BadDocument(kind, doc_id(doc), problem)
        skipped.setdefault((bad.kind, bad.id), bad)

    def user_ok(uid: str, user: Mapping[str, Any]) -> bool:
        ok = checked_users.get(uid)
        if ok is None:
            problem = user_problem(user)
            if problem is not None:
                skip("user", user, problem)
            ok = checked_users[uid] = problem is None
        return ok

    for r in reminders:
        if not isinstance(r, Mapping):
            skip("reminder", r, f"is {type(r).__name__}, not a document")
            continue
        if not r.get("active", True) or r.get("isDeleted"):
            continue
        problem = reminder_problem(r, categories)
        if problem is not None:
            skip("reminder", r, problem)
            continue
        uid = r["userId"]
        user = users.get(uid)
        tokens = tokens_by_user.get(uid)
        if user is None or not tokens or not user_ok(uid, user):
            continue
        if not user_accepts(user, r["category"]):
            continue
        good = []
        for tok in tokens:
            why = token_problem(tok)
            if why is None:
                good.append(tok)
            else:
                skip("token", tok, why)
        try:
            occs = occurrences_between(
                parse_hhmm(r["time"]),
                user["timezone"],
                start,
                end,
                offset_minutes=int(r.get("offsetMinutes") or 0),
                weekdays=r.get("weekdays"),
            )
        except ValueError as exc:  # LocalTimeError is one; the checks above should refuse first
            skip("reminder", r, str(exc))
            continue
        for occ in occs:
            for tok in good:
                out.append(new_message(r, user, tok, occ.at, occ.local_date, now))
    return Plan(out, list(skipped.values()))


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
    takeover: bool = False,
) -> list[WakeUp]:
    """Group messages by category and a window of due instants, at most ``size`` per wake-up.

    Grouping is deterministic (sorted by category, due instant, id), so re-arming the same set
    produces the same wake-ups.

    A wake-up's ``planned_ms`` is the oldest snapshot it carries: the earliest ``plannedAt`` of
    its documents (each taken before its user, reminder and token were read), and never later
    than ``planned_at`` (now, for documents without one). The consumer rechecks every user whose
    intent changed since then, so an edit made while a pass was running, or between planning
    and a re-arm, is never missed. An older time only costs a wider recheck.
    """
    ordered = sorted(docs, key=lambda d: (d["category"], d["scheduledAt"], d["_id"]))
    rows = ((d["category"], to_item(d), _snapshot_ms(d)) for d in ordered)
    return list(
        group_sorted(rows, size=size, window_s=window_s, planned_at=planned_at, takeover=takeover)
    )


def _snapshot_ms(doc: Mapping[str, Any]) -> int | None:
    snapshot = doc.get("plannedAt")
    return _ms(snapshot) if isinstance(snapshot, dt.datetime) else None


def group_sorted(
    rows: Iterable[tuple[str, Item, int | None]],
    *,
    size: int,
    window_s: float,
    planned_at: dt.datetime,
    takeover: bool = False,
) -> Iterator[WakeUp]:
    """``group_wakeups`` over rows already in (category, due instant, id) order, lazily.

    A row is (category, item, the message's ``plannedAt`` in epoch ms or None). Holds one
    wake-up at a time, so a sorted stream of any length (the planner's merge of its spooled
    runs) is grouped in bounded memory, by the same rules as ``group_wakeups``.
    """
    latest_ms = _ms(planned_at)
    window_ms = int(window_s * 1000)
    cur: list[Item] = []
    cur_cat = ""
    cur_planned = latest_ms

    def close() -> WakeUp:
        digest = hashlib.sha1("\n".join(i.id for i in cur).encode()).hexdigest()[:16]
        wid = f"{cur_cat}:{cur[0].due_ms}:{digest}"
        return WakeUp(wid, cur_cat, cur_planned, tuple(cur), takeover=takeover)

    for category, item, snapshot_ms in rows:
        if cur and (
            category != cur_cat or len(cur) >= size or item.due_ms - cur[0].due_ms > window_ms
        ):
            yield close()
            cur = []
            cur_planned = latest_ms
        cur_cat = category
        cur.append(item)
        if snapshot_ms is not None:
            cur_planned = min(cur_planned, snapshot_ms)
    if cur:
        yield close()


class WakeupStream:
    """``group_wakeups`` over documents that arrive chunk by chunk in due order (a cursor).

    ``add`` returns the wake-ups that can no longer grow. The last wake-up of each category is
    held back while a later document could still join it (fewer than ``size`` items, and the
    chunk's latest due instant within ``window_s`` of its first), so wake-ups stay full across
    chunk boundaries; ``close`` returns what is held. At most one wake-up per category is held,
    so memory is bounded by the chunk, not by the input. When chunks split between distinct due
    instants the result is exactly ``group_wakeups`` over the whole input; a split inside one
    instant orders that instant's documents per chunk, which still gives full wake-ups.
    """

    def __init__(
        self, *, size: int, window_s: float, planned_at: dt.datetime, takeover: bool = False
    ) -> None:
        self._kw: dict[str, Any] = {
            "size": size,
            "window_s": window_s,
            "planned_at": planned_at,
            "takeover": takeover,
        }
        self._size = size
        self._window_ms = int(window_s * 1000)
        self._held: list[Mapping[str, Any]] = []
        self._last: dt.datetime | None = None

    @property
    def held(self) -> int:
        """Documents read and not yet in a returned wake-up."""
        return len(self._held)

    def add(self, docs: Iterable[Mapping[str, Any]]) -> list[WakeUp]:
        chunk = list(docs)
        if not chunk:
            return []
        first = min(d["scheduledAt"] for d in chunk)
        if self._last is not None and first < self._last:
            raise ValueError(
                f"documents must arrive in due order: {first.isoformat()} after "
                f"{self._last.isoformat()}"
            )
        self._last = max(d["scheduledAt"] for d in chunk)
        last_ms = _ms(self._last)
        pool = self._held + chunk
        wakeups = group_wakeups(pool, **self._kw)
        last_of = {w.category: n for n, w in enumerate(wakeups)}
        open_ = {
            n
            for n in last_of.values()
            if len(wakeups[n].items) < self._size
            and last_ms - wakeups[n].first_due_ms <= self._window_ms
        }
        by_id = {d["_id"]: d for d in pool}
        self._held = [by_id[i.id] for n in sorted(open_) for i in wakeups[n].items]
        return [w for n, w in enumerate(wakeups) if n not in open_]

    def close(self) -> list[WakeUp]:
        held, self._held = self._held, []
        return group_wakeups(held, **self._kw)


def _ms(at: dt.datetime) -> int:
    return int(at.timestamp() * 1000)
