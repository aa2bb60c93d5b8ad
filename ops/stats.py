"""``tzpush stats``: what the database says about sending, for an operator.

Counts by status and by category, the reasons messages were cancelled, failed or missed,
lateness percentiles of what was sent, tokens active and inactive, and what is still pending by
due hour. This is the ops path, run by a person now and then: it reads every message, once,
through a cursor (``compute``), never as an aggregation that must finish in one round trip.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from pymongo.database import Database

from shared.domain.messages import ENDED_WITHOUT_SUCCESS, Doc, Status
from shared.instants import EPOCH
from shared.store import fleet
from shared.store.mongo.figures import READ_BATCH, read_for_stats

ENDED = ENDED_WITHOUT_SUCCESS
TOP_REASONS = 10


def percentile(sorted_values: list[int], p: float) -> int | None:
    """Nearest-rank percentile (p in 0..100) of an ascending list; None when empty."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def compute(
    database: Database[Doc],
    since: dt.datetime | None = None,
    categories: Iterable[str] = (),
    *,
    progress: Callable[[int], None] | None = None,
    sent_since: dt.datetime | None = None,
) -> Doc:
    """Every figure ``tzpush stats`` shows, as plain JSON-able data.

    ``since`` limits message figures to messages due at or after it (``scheduledAt``); token
    counts and pending-by-hour are always current. ``progress`` is told how many messages were
    read, a batch at a time. ``sent_since``: also count the pushes Expo accepted (``sentAt``)
    at or after it, by whole minute (``sent_per_minute``, for the console's chart).

    One read of the messages (the fields the figures need) and one of the registrations
    (``shared.store.mongo.figures.read_for_stats``: cursors, never aggregations), the figures
    made here as the documents go by. A document edited by hand never stops it: a figure's
    name that is not a string (none, a list) counts under its text, a date out of range or a
    lateness that is not a finite number is left out. Memory: the counts, and one integer per
    sent message for the percentiles.
    """
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=dt.UTC)
    f = _Figures(since, sent_since)

    def add(d: Doc) -> None:
        f.add(d)
        if progress is not None and f.seen % READ_BATCH == 0:
            progress(READ_BATCH)

    active, inactive = read_for_stats(database, add)
    if progress is not None and f.seen % READ_BATCH:
        progress(f.seen % READ_BATCH)
    messages, by_category, reasons, sent = f.messages, f.by_category, f.reasons, f.sent
    pending_by_hour, ordered = f.pending_by_hour, sorted(f.lateness)
    out: Doc = {
        "since": since.isoformat() if since else None,
        "messages": dict(sorted(messages.items())),
        "by_category": {c: dict(sorted(v.items())) for c, v in sorted(by_category.items())},
        "reasons": {
            status: [{"reason": r, "count": n} for r, n in counts.most_common(TOP_REASONS)]
            for status, counts in reasons.items()
            if counts
        },
        "lateness_ms": {
            "count": len(ordered),
            "p50": percentile(ordered, 50),
            "p95": percentile(ordered, 95),
            "max": ordered[-1] if ordered else None,
        },
        "tokens": {"active": active, "inactive": inactive},
        "pending_by_hour": dict(sorted(pending_by_hour.items())),
        "senders": _senders(database, categories),
    }
    if sent_since is not None:
        out["sent_per_minute"] = dict(sorted(sent.items()))
    return out


class _Figures:
    """The message figures, one document at a time."""

    def __init__(self, since: dt.datetime | None, sent_since: dt.datetime | None) -> None:
        self.since, self.sent_since = since, sent_since
        self.seen = 0
        self.messages: dict[str, int] = defaultdict(int)
        self.by_category: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.reasons: dict[str, Counter[str | None]] = {str(s): Counter() for s in ENDED}
        self.lateness: list[int] = []
        self.pending_by_hour: dict[str, int] = defaultdict(int)
        self.sent: Counter[dt.datetime] = Counter()

    def add(self, d: Doc) -> None:
        self.seen += 1
        status, at = _name(d.get("status")), _instant(d.get("scheduledAt"))
        pending = status == Status.PENDING.value and d.get("isDeleted") is False
        if pending and at is not None and at >= EPOCH:
            self.pending_by_hour[at.strftime("%Y-%m-%dT%H:00Z")] += 1
        if self.sent_since is not None:
            when = _instant(d.get("sentAt"))
            if when is not None and when >= self.sent_since:
                self.sent[when.replace(second=0, microsecond=0)] += 1
        if self.since is not None and not (at is not None and at >= self.since):
            return
        self.messages[status] += 1
        self.by_category[_name(d.get("category"))][status] += 1
        if status in self.reasons:
            reason = d.get("reason")
            self.reasons[status][reason if reason is None else _name(reason)] += 1
        late = d.get("lateness_ms")
        if (
            status == Status.SUCCESS.value
            and isinstance(late, int | float)
            and not isinstance(late, bool)
            and math.isfinite(late)
        ):
            self.lateness.append(int(late))


def _name(v: Any) -> str:
    """A figure's name: the text of what the document holds ("None" where it holds none)."""
    return v if isinstance(v, str) else str(v)


def _instant(v: Any) -> dt.datetime | None:
    if not isinstance(v, dt.datetime):
        return None
    return v.astimezone(dt.UTC) if v.tzinfo else v.replace(tzinfo=dt.UTC)


def _senders(database: Database[Doc], categories: Iterable[str]) -> Doc:
    """Live senders (the registry of shared.store.fleet) and the categories nobody consumes."""
    now = dt.datetime.now(dt.UTC)
    live = fleet.live_senders(database, now)
    return {
        "live": [
            {
                "id": d["_id"],
                "kind": d.get("kind"),
                "categories": d.get("categories") or [],
                "host": d.get("host"),
                "heartbeat_age_s": round((now - d["heartbeatAt"]).total_seconds(), 1),
            }
            for d in sorted(live, key=lambda d: str(d["_id"]))
        ],
        "categories_without_consumer": fleet.categories_without_consumer(database, categories, now),
    }


def render(stats: Doc) -> None:
    """Print ``compute``'s result as rich tables."""
    from rich.table import Table
    from rich.text import Text

    from shared import terminal

    console = terminal.console()
    title = "messages" + (f" due since {stats['since']}" if stats["since"] else "")
    statuses = sorted(stats["messages"])
    t = Table(title=title)
    t.add_column("category")
    for s in statuses:
        t.add_column(s, justify="right")
    for cat, counts in stats["by_category"].items():
        t.add_row(Text(str(cat)), *(str(counts.get(s, 0)) for s in statuses))
    t.add_row("[b]total[/]", *(f"[b]{stats['messages'][s]}[/]" for s in statuses))
    console.print(t)
    lat = stats["lateness_ms"]
    if lat["count"]:
        console.print(
            f"lateness of sent messages ({lat['count']}): p50 {lat['p50']} ms, "
            f"p95 {lat['p95']} ms, max {lat['max']} ms"
        )
    else:
        console.print("lateness of sent messages: none sent yet")
    console.print(
        f"tokens: {stats['tokens']['active']} active, {stats['tokens']['inactive']} inactive"
    )
    senders = stats.get("senders") or {}
    kinds: dict[str, int] = defaultdict(int)
    for row in senders.get("live", []):
        kinds[row["kind"]] += 1
    live = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"
    console.print(Text(f"live senders: {live}"))
    if senders.get("categories_without_consumer"):
        missing = ", ".join(senders["categories_without_consumer"])
        console.print(Text(f"no consumer alive for: {missing}", style="bold red"))
    if stats["reasons"]:
        r = Table(title="reasons (top 10 per status)")
        for col in ("status", "count", "reason"):
            r.add_column(col)
        for status, rows in stats["reasons"].items():
            for row in rows:
                r.add_row(status, str(row["count"]), Text(str(row["reason"])))
        console.print(r)
    if stats["pending_by_hour"]:
        p = Table(title="pending by due hour (UTC)")
        p.add_column("hour")
        p.add_column("pending", justify="right")
        for hour, n in stats["pending_by_hour"].items():
            p.add_row(hour, str(n))
        console.print(p)
