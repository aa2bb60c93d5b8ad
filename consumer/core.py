"""What every part of a consumer shares: its state, and how a wake-up's messages end.

``consumer.worker.Consumer`` is assembled from three jobs, one module each: intake, supervision
and shutdown (``worker``), preparation in the lead time (``prepare``) and sending at the due
instant (``dispatch``). This base holds the state they share (declared here so each job's module
can be read and type-checked alone) and the few steps all of them take: recording terminal
decisions, closing ids as their outcomes land, acking a finished wake-up, dead-lettering, and
releasing guards of items that certainly never left.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pymongo
from pymongo.database import Database
from pymongo.errors import PyMongoError

from consumer.attempts import AttemptLog
from consumer.judge import End, judge
from consumer.pending import PendingCache
from consumer.recorder import Job, Recorder
from consumer.timers import Timers
from shared import metrics
from shared.broker import Frame, StompClient
from shared.clock import Clock
from shared.domain.messages import Doc
from shared.errors import TransientError
from shared.expo.pushes import OutgoingPush, PreparedPush, Sender
from shared.settings import Settings
from shared.store import guards
from shared.store import intent as stored_intent
from shared.store.journal import merge_journal
from shared.store.messages import end
from shared.wire import Item, WakeUp, WireError

log = logging.getLogger("consumer.worker")


@dataclass
class Batch:
    """One wake-up being worked on."""

    frame: Frame
    wake: WakeUp
    open: set[str] = field(default_factory=set)  # ids whose outcome is not yet in the database
    # Ids a due group took for sending (from its final check on): they may leave, so their
    # guards are never released by anyone but that due group itself (see ``_release``).
    claimed: set[str] = field(default_factory=set)
    released: bool = False  # given back (lost broker, shutdown): send nothing more of it
    acked: bool = False
    prepared: dict[str, PreparedPush] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ConsumerCore:
    """State shared by the consumer's jobs (set up by ``Consumer.__init__``) and common steps."""

    settings: Settings
    db: Database[Doc]
    sender: Sender
    clock: Clock
    cid: str
    categories: list[str]
    stats: dict[str, int]
    _client: StompClient | None
    _client_factory: Callable[..., StompClient]
    _inbox: queue.Queue[Frame]
    _timers: Timers
    _prep: ThreadPoolExecutor
    _dispatch: ThreadPoolExecutor
    _in_flight: set[str]
    _attempts: AttemptLog
    _recorder: Recorder
    _pending: PendingCache
    _batches: dict[str, Batch]
    _lock: threading.Lock
    _rng: random.Random
    _closing: bool
    _changes_lock: threading.Lock
    _changes: set[str]
    _changes_at: dt.datetime | None
    stop_event: threading.Event
    _signing_key: str | None  # wake-ups must carry its signature (None: loopback broker)
    fenced: str | None  # set once a takeover fenced this consumer: it stops

    @staticmethod
    def _push_of(w: WakeUp, i: Item) -> OutgoingPush:
        data = {**(i.data or {}), "messageId": i.id, "category": w.category, "label": i.label}
        return OutgoingPush(i.id, i.to, i.title, i.body, data)

    def _recent_changes(self) -> set[str]:
        """Users whose intent changed lately: one query shared by every batch due now.

        A herd is many wake-ups due at one instant; asking the database once per second for
        all of them keeps it off the critical path. The window covers everything since any
        held batch was prepared (lead + wake-up window), with a margin.
        """
        c = self.settings.creator
        with self._changes_lock:
            now = self.clock()
            if self._changes_at is None or (now - self._changes_at).total_seconds() > 1.0:
                back_ms = int((c.lead_seconds + c.wakeup_window_seconds + 60) * 1000)
                self._changes = self._changed_since(self._now_ms() - back_ms)
                self._changes_at = now
            return self._changes

    def _merge_journal(self, **kw: Any) -> int:
        return merge_journal(
            self.db,
            receipts_delay_s=self.settings.consumer.receipts_delay_s,
            max_failures=self.settings.consumer.max_token_failures,
            clock=self.clock,
            **kw,
        )

    def _changed_since(self, planned_ms: int) -> set[str]:
        since = dt.datetime.fromtimestamp(planned_ms / 1000, dt.UTC)
        return stored_intent.changed_users(self.db, since)

    def _judge(
        self, w: WakeUp, items: list[Item], now: dt.datetime, changed: set[str], caps: bool = True
    ) -> tuple[list[End], list[Item]]:
        grace_s = self.settings.grace_seconds(w.category)
        return judge(self.db, w.category, grace_s, items, now, changed, reserve_caps=caps)

    def _holds(self, message_id: str) -> bool:
        """Whether this consumer holds the message in a live wake-up (or is sending it): a
        second copy of it (a duplicate wake-up) must not take its guard over."""
        with self._lock:
            if message_id in self._in_flight:
                return True
            batches = list(self._batches.values())
        for b in batches:
            with b.lock:
                if not b.released and message_id in b.open:
                    return True
        return False

    def _dead_letter(self, frame: Frame, kind: str, reason: str) -> None:
        """Park the frame on the dead-letter queue with its reason; ``kind`` (one of
        ``WireError.KINDS``) is the metric label, so frame text never becomes a label."""
        log.error("dead-lettering wake-up %s (%s): %s", frame.message_id, kind, reason[:300])
        metrics.DLQ.labels(kind if kind in WireError.KINDS else "consumer_error").inc()
        client = self._client
        if client is None:
            return
        client.send(
            self.settings.dlq,
            frame.body,
            headers={
                "tzpush-reason": reason[:500],
                "tzpush-original-destination": frame.destination,
            },
        )
        client.ack(frame)

    def _finish(self, key: str, batch: Batch, ends: list[End]) -> None:
        """Record terminal decisions taken without sending (cancelled, is_missed)."""
        if not ends:
            return
        now = self.clock()
        updates = [
            end(it.id, status, reason, now, consumer=self.cid) for it, status, reason in ends
        ]
        outcomes = [(batch.wake.category, status) for _, status, _ in ends]
        ids = [it.id for it, _, _ in ends]
        for it, status, reason in ends:
            log.info(
                "message %s %s: %s",
                it.id,
                status,
                reason,
                extra={"message_id": it.id, "user_id": it.user, "category": batch.wake.category},
            )
        self._recorder.put(
            Job(updates, [], outcomes, done=lambda: self._close_ids(key, batch, ids))
        )

    def _close_ids(self, key: str, batch: Batch, ids: list[str]) -> None:
        with batch.lock:
            batch.open.difference_update(ids)
            empty = not batch.open
        if empty:
            self._maybe_ack(key, batch)

    def _maybe_ack(self, key: str, batch: Batch) -> None:
        with batch.lock:
            if batch.acked or batch.released or batch.open:
                return
            batch.acked = True
        client = self._client
        try:
            if client is not None:
                client.ack(batch.frame)
        except TransientError as exc:
            log.warning(
                "ack of %s failed (%s): it will be redelivered and skipped", batch.wake.id, exc
            )
        with self._lock:
            self._batches.pop(key, None)
        self.stats["batches"] += 1

    def _dead_letter_batch(self, key: str, batch: Batch, reason: str) -> None:
        try:
            self._dead_letter(batch.frame, "consumer_error", reason)
        finally:
            with self._lock:
                self._batches.pop(key, None)

    def _release(self, batch: Batch, items: list[Item]) -> None:
        """Give the wake-up back (lost broker, shutdown): send nothing more of it, and release
        the guards of those ``items`` that certainly never left, i.e. no due group claimed them.

        A claimed item may be in a request already: its guard stays, and whoever gets the
        redelivered frame decides from this consumer's journal and attempt records (a takeover).
        """
        with batch.lock:
            batch.released = True
            free = [i.id for i in items if i.id not in batch.claimed]
        self._release_guards(free)

    def _unclaim(self, batch: Batch, items: list[Item]) -> None:
        """A due group gives back items it claimed and certainly did not send."""
        with batch.lock:
            batch.claimed.difference_update(i.id for i in items)
        self._release_guards([i.id for i in items])

    def _release_guards(self, ids: list[str], budget_s: float | None = None) -> None:
        """Delete this consumer's guards of ``ids``; ``budget_s`` bounds the whole attempt
        (server selection included), as at shutdown."""
        if not ids:
            return
        try:
            if budget_s is None:
                guards.release(self.db, ids, self.cid)
            else:
                with pymongo.timeout(budget_s):
                    guards.release(self.db, ids, self.cid)
        except PyMongoError as exc:
            log.warning("could not release guards (%s); a redelivery will take them over", exc)

    def _on_fenced(self, exc: Exception) -> None:
        """Another consumer took over this one's guards: send nothing more, stop. A restart
        is a new consumer (a new id), so fencing never outlives the process it stopped."""
        if self.fenced is None:
            log.error("%s: %s; stopping (a restart is a new consumer)", self.cid, exc)
        self.fenced = str(exc)
        self.stop_event.set()

    def _now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)
