"""Re-arming from the database: ``tzpush rebuild``, after the broker lost its store.

Streams: pending messages are read with a cursor in due order, ``REARM_CHUNK`` at a time, so the
memory of a rebuild does not grow with the number of pending messages. Kept apart from the
planner's passes: it reads messages, not reminders, and its takeover rule (which guards a
rebuild may hand over) concerns consumers that stopped, not planning.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from creator.context import PlanContext, Wired
from creator.janitor import LOOKBACK
from creator.wakeups import WakeupPublisher
from shared.domain.messages import Doc
from shared.domain.plan import WakeupStream

# A re-arm reads and arms this many pending messages at a time: its memory is bounded by this,
# not by the number of pending messages.
REARM_CHUNK = 5000
# This server reads a whole index range before it answers even one document (measured: the
# first batch of 50,000 pending messages 2.9 s, of 5,000 0.25 s), so a read of every pending
# message passes the driver's 30 s timeout at 1M. A rebuild reads (and counts) them a slice of
# due time at a time: an hour holds about 42,000 at 1M over a day (2 to 3 s of the server's time
# each), and the eight days a rebuild looks at are about 200 reads and as many counts.
REARM_SLICE = dt.timedelta(hours=1)
# A consumer holds a guard from the lead time before a due instant until it sends; past this
# margin after both its guard and the due instant (plus lead and wake-up window), a guard on a
# message still pending is presumed left by a consumer that stopped (see ``rearm``).
STOPPED_MARGIN_S = 60.0


@dataclass
class Rearmed:
    """What a re-arm did (printed by ``tzpush rebuild``)."""

    messages: int = 0
    wakeups: int = 0
    taken_over: int = 0  # guarded by a consumer presumed stopped: armed for a takeover
    held: int = 0  # guarded by a consumer that may still be running: left to it


def rearm(
    ctx: PlanContext,
    publisher: WakeupPublisher,
    start: dt.datetime,
    end: dt.datetime,
    *,
    progress: Callable[[int], object] | None = None,
    take_over_stopped: bool = False,
) -> Rearmed:
    """Publish wake-ups for every pending message due in ``[start, end)``, from the database.

    Streams: the pending messages are read with a cursor in due order and armed
    ``REARM_CHUNK`` at a time, each category's last wake-up carried into the next chunk
    while it can still grow (``WakeupStream``), so wake-ups stay full and memory is bounded
    by the chunk. ``progress`` gets the number of messages of each wake-up published.

    Each wake-up keeps the snapshot time of what it names (the oldest ``plannedAt``), not
    the time of the re-arm: the consumer rechecks every change made since the data was read.

    ``take_over_stopped`` (``tzpush rebuild``, after the broker lost its store, when no
    frame of a dead consumer will ever be redelivered): messages guarded by a consumer
    presumed stopped go in wake-ups marked ``takeover``, whose consumer takes those guards
    over as for a redelivered frame (the holder fenced, its journal merged, its attempt
    records ending what may have left ``failed``). Presumed stopped: both the guard and the
    due instant are older than lead + wake-up window + ``STOPPED_MARGIN_S``, by when a
    running consumer has sent the message or recorded the attempt. Anything else guarded is
    left to its holder, in ordinary wake-ups that skip it.
    """
    c = ctx.settings.creator
    chunk = REARM_CHUNK
    now = ctx.clock()
    kw: dict[str, Any] = {"size": c.wakeup_size, "window_s": ctx.settings.wakeup.window_seconds}
    plain = WakeupStream(planned_at=now, **kw)
    taking = WakeupStream(planned_at=now, takeover=True, **kw)
    out = Rearmed()
    for a, b in _slices(ctx, start, end):
        cursor = ctx.stores.pending.due(a, b, chunk)
        try:
            while docs := list(itertools.islice(cursor, chunk)):
                out.messages += len(docs)
                stopped: set[str] = set()
                if take_over_stopped:
                    stopped, held = _held_by_stopped(ctx, docs)
                    out.taken_over += len(stopped)
                    out.held += held
                wakeups = plain.add([d for d in docs if d["_id"] not in stopped])
                wakeups += taking.add([d for d in docs if d["_id"] in stopped])
                out.wakeups += len(publisher.send(wakeups, progress))
        finally:
            cursor.close()
    out.wakeups += len(publisher.send(plain.close() + taking.close(), progress))
    publisher.finish(out.wakeups)
    return out


def count_pending(source: Wired, start: dt.datetime, end: dt.datetime) -> int:
    """How many pending messages are due in ``[start, end)`` (a rebuild's progress total),
    counted a slice at a time like the rebuild reads them. ``source``: a ``Planner`` or its
    ``PlanContext``."""
    pending = source.stores.pending
    return sum(pending.count_due(a, b) for a, b in _slices(source, start, end))


def _slices(
    source: Wired, start: dt.datetime, end: dt.datetime
) -> Iterator[tuple[dt.datetime, dt.datetime]]:
    """``[start, end)`` in due order: ``REARM_SLICE`` at a time where pending messages can be
    (from the janitor's ``LOOKBACK`` before now to a slice past the horizon), and what lies
    outside that (normally nothing: older ones are not swept, later ones not planned) as one
    range on each side."""
    now = source.clock()
    horizon = dt.timedelta(hours=source.settings.creator.horizon_hours)
    lo, hi = max(start, now - LOOKBACK), min(end, now + horizon + REARM_SLICE)
    if lo >= hi:
        yield start, end
        return
    if start < lo:
        yield start, lo
    a = lo
    while a < hi:
        yield a, min(a + REARM_SLICE, hi)
        a += REARM_SLICE
    if hi < end:
        yield hi, end


def _held_by_stopped(ctx: PlanContext, docs: list[Doc]) -> tuple[set[str], int]:
    """Ids of ``docs`` guarded by a consumer presumed stopped, and how many others are held.

    Only messages a consumer can hold are looked up: due before now + lead + wake-up window
    (a wake-up fires ``lead`` before its first due instant and spans one window).
    """
    w = ctx.settings.wakeup
    now = ctx.clock()
    reach = dt.timedelta(seconds=w.lead_seconds + w.window_seconds)
    stale = now - reach - dt.timedelta(seconds=STOPPED_MARGIN_S)
    due = {d["_id"]: d["scheduledAt"] for d in docs if d["scheduledAt"] < now + reach}
    if not due:
        return set(), 0
    stopped: set[str] = set()
    held = 0
    for g in ctx.stores.pending.guards_on(due):
        if isinstance(g.at, dt.datetime) and g.at <= stale and due[g.id] <= stale:
            stopped.add(g.id)
        else:
            held += 1
    return stopped, held
