"""``tzpush stats``: what the database says about sending, for an operator.

Counts by status and by category, the reasons messages were cancelled, failed or missed,
lateness percentiles of what was sent, tokens active and inactive, and what is still pending by
due hour. This is the ops path, run by a person now and then, so aggregations and one scan of
``lateness_ms`` are fine here (the hot paths never aggregate).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterable

from pymongo.database import Database

from shared.domain.messages import ENDED_WITHOUT_SUCCESS, Doc, Status
from shared.store import db as dbm
from shared.store import fleet

ENDED = ENDED_WITHOUT_SUCCESS
TOP_REASONS = 10


def percentile(sorted_values: list[int], p: float) -> int | None:
    """Nearest-rank percentile (p in 0..100) of an ascending list; None when empty."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def compute(
    database: Database[Doc], since: dt.datetime | None = None, categories: Iterable[str] = ()
) -> Doc:
    """Every figure ``tzpush stats`` shows, as plain JSON-able data.

    ``since`` limits message figures to messages due at or after it (``scheduledAt``); token
    counts and pending-by-hour are always current.
    """
    coll = database[dbm.MESSAGES]
    match: Doc = {"scheduledAt": {"$gte": since}} if since else {}
    messages: dict[str, int] = {}
    by_category: dict[str, dict[str, int]] = defaultdict(dict)
    for row in coll.aggregate(
        [
            {"$match": match},
            {"$group": {"_id": {"s": "$status", "c": "$category"}, "n": {"$sum": 1}}},
        ]
    ):
        status, category = row["_id"].get("s"), row["_id"].get("c")
        messages[status] = messages.get(status, 0) + row["n"]
        by_category[category][status] = row["n"]
    reasons: dict[str, list[Doc]] = {}
    for status in ENDED:
        rows = coll.aggregate(
            [
                {"$match": {**match, "status": status}},
                {"$group": {"_id": "$reason", "n": {"$sum": 1}}},
                {"$sort": {"n": -1}},
                {"$limit": TOP_REASONS},
            ]
        )
        found = [{"reason": r["_id"], "count": r["n"]} for r in rows]
        if found:
            reasons[status] = found
    lateness = sorted(
        int(d["lateness_ms"])
        for d in coll.find({**match, "status": Status.SUCCESS.value}, {"lateness_ms": 1, "_id": 0})
        if d.get("lateness_ms") is not None
    )
    tokens = database[dbm.TOKENS]
    pending_by_hour: dict[str, int] = defaultdict(int)
    for d in coll.find(
        {
            "status": Status.PENDING.value,
            "isDeleted": False,
            "scheduledAt": {"$gte": dt.datetime(1970, 1, 1)},
        },
        {"scheduledAt": 1},
    ):
        pending_by_hour[d["scheduledAt"].astimezone(dt.UTC).strftime("%Y-%m-%dT%H:00Z")] += 1
    return {
        "since": since.isoformat() if since else None,
        "messages": dict(sorted(messages.items())),
        "by_category": {c: dict(sorted(v.items())) for c, v in sorted(by_category.items())},
        "reasons": reasons,
        "lateness_ms": {
            "count": len(lateness),
            "p50": percentile(lateness, 50),
            "p95": percentile(lateness, 95),
            "max": lateness[-1] if lateness else None,
        },
        "tokens": {
            "active": tokens.count_documents({"isActive": True}),
            "inactive": tokens.count_documents({"isActive": False}),
        },
        "pending_by_hour": dict(sorted(pending_by_hour.items())),
        "senders": _senders(database, categories),
    }


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
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
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
    console.print(
        f"lateness of sent messages ({lat['count']}): p50 {lat['p50']} ms, "
        f"p95 {lat['p95']} ms, max {lat['max']} ms"
    )
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
