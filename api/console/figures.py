"""The console's figures: what the overview, the upcoming page and the problems page show.

The overview's counts, lateness and live senders are ``ops.stats.compute`` itself (the figures
of ``tzpush stats`` and ``GET /v1/stats``), so the three never disagree. What stats does not
have is read here, on the same terms (an operator's page, read now and then; no hot path):
sends per minute over the last hour (``sentAt``, which no index serves: one scan, as stats'
lateness is), pending messages by due hour and category (the range of the pending index), the
wake-ups those pending messages make as the planner groups them, and the missed or failed
messages with their reasons (of the chosen status).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass

from pymongo.database import Database

from ops import stats as ops_stats
from shared.domain.messages import Doc, Status
from shared.domain.outcomes import REPLAY_CAUSES
from shared.domain.plan import group_wakeups
from shared.domain.replay import says_a_cause
from shared.instants import EPOCH
from shared.settings import Settings
from shared.store.mongo import figures as stored

WINDOWS: dict[str, dt.timedelta | None] = {
    "1h": dt.timedelta(hours=1),
    "6h": dt.timedelta(hours=6),
    "24h": dt.timedelta(hours=24),
    "7d": dt.timedelta(days=7),
    "all": None,
}
WINDOW_LABELS = {
    "1h": "the last hour",
    "6h": "the last 6 hours",
    "24h": "the last 24 hours",
    "7d": "the last 7 days",
    "all": "all time",
}
DEFAULT_WINDOW = "24h"
STATUS_ORDER = [s.value for s in Status]
WAKEUPS_READ = 50_000  # pending messages read at most to group into wake-ups
WAKEUPS_LISTED = 200
# What grouping reads of a message (``shared.domain.plan.to_item``); a document without them
# (edited by hand) is counted in its hour but left out of the wake-ups, as the planner skips it.
REQUIRED_FOR_WAKEUPS = ("userId", "reminderId", "notificationTokenId", "token")
PROBLEMS_LISTED = 200


def window_start(window: str, now: dt.datetime) -> dt.datetime | None:
    span = WINDOWS[window]
    return None if span is None else now - span


# -- overview --------------------------------------------------------------------------------
@dataclass
class Overview:
    stats: Doc
    statuses: list[str]
    categories: list[str]
    sends_per_minute: list[tuple[dt.datetime, int]]
    consumers: list[tuple[str, int]]  # (category, live consumers taking it)
    other_senders: list[Doc]  # live senders that are not consumers (replays)


def overview(
    database: Database[Doc], settings: Settings, since: dt.datetime | None, now: dt.datetime
) -> Overview:
    end = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    start = end - dt.timedelta(minutes=60)
    # One read of the messages for both (the chart's own read was another scan of them all).
    stats: Doc = ops_stats.compute(
        database, since, categories=settings.categories, sent_since=start
    )
    per_minute: dict[dt.datetime, int] = stats.pop("sent_per_minute")
    seen = set(stats["messages"])
    statuses = [s for s in STATUS_ORDER if s in seen] + sorted(seen - set(STATUS_ORDER))
    live = stats["senders"]["live"]
    taking: Counter[str] = Counter()
    for s in live:
        if s.get("kind") == "consumer":
            taking.update(set(s.get("categories") or []))
    return Overview(
        stats=stats,
        statuses=statuses,
        categories=[str(c) for c in stats["by_category"]],
        sends_per_minute=[
            (start + dt.timedelta(minutes=i), per_minute.get(start + dt.timedelta(minutes=i), 0))
            for i in range(60)
        ],
        consumers=[(c, taking[c]) for c in settings.categories],
        other_senders=[s for s in live if s.get("kind") != "consumer"],
    )


# -- upcoming --------------------------------------------------------------------------------
@dataclass
class Upcoming:
    start: dt.datetime  # the hour now running
    hours: list[dt.datetime]
    categories: list[str]
    counts: dict[dt.datetime, dict[str, int]]
    overdue: int  # pending and already due (the consumers are at them, or nobody is)
    wakeups: list[Doc]
    wakeup_total: int
    read_all: bool
    size: int  # the planner's grouping: messages per wake-up, window, lead
    window_s: float
    lead_s: float


def upcoming(database: Database[Doc], settings: Settings, now: dt.datetime) -> Upcoming:
    """Pending messages by due hour (UTC) and category for the next 24 h, and their wake-ups."""
    start = now.replace(minute=0, second=0, microsecond=0)
    end = now + dt.timedelta(hours=24)
    hours = [
        start + dt.timedelta(hours=i) for i in range(25) if start + dt.timedelta(hours=i) < end
    ]
    counts: dict[dt.datetime, dict[str, int]] = {h: defaultdict(int) for h in hours}
    fields = ("scheduledAt", "category", "plannedAt", *REQUIRED_FOR_WAKEUPS)
    docs: list[Doc] = []
    read_all = True
    for d in stored.pending_due(database, fields, now, end):
        at, cat = d.get("scheduledAt"), d.get("category")
        if not isinstance(at, dt.datetime) or not isinstance(cat, str):
            continue
        hour = at.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
        if hour in counts:
            counts[hour][cat] += 1
        if len(docs) < WAKEUPS_READ:
            if all(isinstance(d.get(k), str) for k in REQUIRED_FOR_WAKEUPS):
                docs.append(d)
        else:
            read_all = False
    overdue = stored.count_overdue(database, now)
    seen = {c for per in counts.values() for c in per}
    categories = [c for c in settings.categories if c in seen] + sorted(
        seen - set(settings.categories)
    )
    c, timing = settings.creator, settings.wakeup
    groups = group_wakeups(docs, size=c.wakeup_size, window_s=timing.window_seconds, planned_at=now)
    groups.sort(key=lambda w: (w.first_due_ms, w.category))
    lead = dt.timedelta(seconds=timing.lead_seconds)
    wakeups = [
        {
            "category": w.category,
            "fires": max(now, _at(w.first_due_ms) - lead),
            "first": _at(w.first_due_ms),
            "last": _at(max(i.due_ms for i in w.items)),
            "messages": len(w.items),
        }
        for w in groups[:WAKEUPS_LISTED]
    ]
    return Upcoming(
        start=start,
        hours=hours,
        categories=categories,
        counts={h: dict(v) for h, v in counts.items()},
        overdue=overdue,
        wakeups=wakeups,
        wakeup_total=len(groups),
        read_all=read_all,
        size=c.wakeup_size,
        window_s=timing.window_seconds,
        lead_s=timing.lead_seconds,
    )


def _at(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)


# -- problems --------------------------------------------------------------------------------
PROBLEM_STATUSES = (Status.IS_MISSED.value, Status.FAILED.value)


@dataclass
class ProblemFilter:
    status: str = Status.IS_MISSED.value
    category: str = ""
    user: str = ""
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def reads(self, database: Database[Doc]) -> stored.ProblemReads:
        """The reads of the messages this filter matches."""
        return stored.ProblemReads(
            database,
            self.status,
            category=self.category,
            user=self.user,
            since=self.since,
            until=self.until,
        )


@dataclass
class Problems:
    reasons: list[Doc]  # {status, reason, count}, most first
    messages: list[Doc]
    total: int
    replayable: int  # of ``total``: what a replay of all matching would take


def replayable_failed(database: Database[Doc], message_id: str) -> bool:
    """Whether a failed message is one a replay takes (a project-level cause)."""
    doc = stored.failure_causes(database, message_id)
    return doc is not None and _replayable(doc)


def problems(database: Database[Doc], flt: ProblemFilter) -> Problems:
    """The messages the filter matches (its one status) grouped by reason, most first, and
    listed, latest due first."""
    reads = flt.reads(database)
    reasons = [{"status": flt.status, "reason": r, "count": n} for r, n in reads.reasons()]
    reasons.sort(key=lambda r: (-r["count"], str(r["reason"])))
    if flt.status == Status.FAILED.value:
        # Counted here from one read of the failed messages (the index ``failed_by_time``).
        takes = [_replayable(d) for d in reads.causes()]
        total, replayable = len(takes), sum(takes)
    else:
        total = reads.count()
        replayable = total
    docs = reads.latest(PROBLEMS_LISTED)
    for d in docs:
        d["replayable"] = d.get("status") == Status.IS_MISSED.value or _replayable(d)
    return Problems(reasons=reasons, messages=docs, total=total, replayable=replayable)


CAUSE_CODES = frozenset(c.value for cs in REPLAY_CAUSES.values() for c in cs)


def _replayable(d: Doc) -> bool:
    """Whether a failed message's code, or its receipt's, is one a replay takes."""
    return says_a_cause(d, CAUSE_CODES)
