"""Replays, as operators start them: ``tzpush replay`` takes and sends in its own process
(``Replayer.run``: it runs where the operator has the Expo access token); the API and the
console take, then queue what they took to the consumers (``queue``), which send it.

The rules live in ``shared``, where the consumer reaches them too: the selection in
``shared.replay_selection``, taking, judging, sending and recording in ``shared.replaying``,
the replay's records on the message in ``shared.store.replays``. docs/architecture.md
("Replays") says who claims, who sends, and what a crash at each step leaves.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any, cast

from creator.wakeups import WakeupPublisher
from shared.clock import Clock, utcnow
from shared.domain.messages import Doc, Status
from shared.domain.plan import to_item
from shared.errors import TransientError
from shared.expo.pushes import Sender
from shared.replay_selection import EPOCH, FAR, REPLAYABLE, Selection, resume, select, unchanged
from shared.replaying import (
    CANCELLED,
    CHUNK,
    MALFORMED,
    QUIET,
    STOPPED,
    UNKNOWN,
    Replayer,
    _malformed,
    send_replay,
)
from shared.settings import Settings
from shared.store import db as dbm
from shared.store import replays
from shared.store.mongo import ReplayWhere
from shared.wire import Item, WakeUp, WireError, decode

log = logging.getLogger(__name__)

QUEUED = "queued"


def queue(
    where: ReplayWhere,
    settings: Settings,
    publisher: WakeupPublisher,
    docs: list[Doc],
    *,
    by: str,
    reason: str,
    selection: Selection,
    run_id: str = "",
    clock: Clock = utcnow,
) -> Counter[str]:
    """Take ``docs`` for a replay run (as ``Replayer`` takes) and hand them to the consumers:
    replay wake-ups of at most ``creator.wakeup_size`` messages per category, marked with the
    run (``WakeUp.replay``), signed and confirmed by the broker like every wake-up. Returns
    the counts (``queued``, and what was skipped or left). Nothing is sent here.

    If the broker refuses or fails, what this run took is settled before the error is raised
    (a ``TransientError``: 503 from the API): none of it left, so all of it goes back to where
    it came from. ``where``: a replay's stores, or a MongoDB database."""
    replayer = Replayer(
        where,
        settings,
        cast(Sender, _NoSender()),
        by,
        reason,
        clock=clock,
        run_id=run_id,
        selection=selection,
    )
    counts = replayer.counts
    mine = [d for i in range(0, len(docs), CHUNK) for d in replayer.take(docs[i : i + CHUNK])]
    now = clock()
    items: dict[str, list[Item]] = {}
    left = []
    for d in mine:
        bad = _malformed(d) or _not_on_the_wire(d)
        if bad:
            left.append(
                replays.back_to_missed(d["_id"], replayer.run_id, bad, now, replayer.origin)
            )
        else:
            items.setdefault(d["category"], []).append(to_item(d))
    if left:
        with dbm.translate_errors("recording what the replay does not send"):
            replayer.stores.replays.write(left)
        counts[MALFORMED.replace(Status.IS_MISSED.value, replayer.origin.value)] += len(left)
    size = settings.creator.wakeup_size
    planned_ms = int(now.timestamp() * 1000)
    wakeups = [
        WakeUp(
            f"{replayer.run_id}:{category}:{n}",
            category,
            planned_ms,
            tuple(its[i : i + size]),
            replay=replayer.run_id,
        )
        for category, its in sorted(items.items())
        for n, i in enumerate(range(0, len(its), size))
    ]
    try:
        publisher.send(wakeups)
        publisher.finish(len(wakeups))
    except BaseException as exc:
        settled = replays.settle(replayer.stores, replayer.run_id, replayer.run_id, clock())
        log.warning("replay %s not queued (%r): %s", replayer.run_id, exc, settled.describe())
        if isinstance(exc, RuntimeError):  # no broker at all: as unavailable as a lost one
            raise TransientError(f"replay not queued: {exc}") from exc
        raise
    counts[QUEUED] += sum(len(w.items) for w in wakeups)
    log.info("replay %s by %s: %d message(s) queued", replayer.run_id, by, counts[QUEUED])
    return counts


def _not_on_the_wire(doc: Doc) -> str | None:
    """Why a message cannot travel in a wake-up (a field a consumer would refuse), or ``None``:
    one such message would dead-letter the whole wake-up, holding the others for a lease."""
    try:
        decode(WakeUp("check", str(doc["category"]), 0, (to_item(doc),)).encode())
    except (WireError, TypeError, ValueError) as exc:
        return f"malformed document, not replayed: {exc}"
    return None


class _NoSender:
    """What ``queue``'s replayer sends with: nothing (it only takes)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("a queued replay sends from the consumers, never from here")


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises ``SystemExit`` (so ``finally`` and settling run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = [
    "CANCELLED",
    "EPOCH",
    "FAR",
    "QUEUED",
    "QUIET",
    "REPLAYABLE",
    "STOPPED",
    "UNKNOWN",
    "Replayer",
    "Selection",
    "queue",
    "resume",
    "select",
    "send_replay",
    "sigterm_raises",
    "unchanged",
]
