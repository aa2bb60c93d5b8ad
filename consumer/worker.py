"""The consumer: take wake-ups, prepare before the due instant, send at it, account for all.

Per wake-up (docs/architecture.md): decode (else dead-letter); at ``lead`` before the first due
instant, check which ids are still pending (one shared index range), take the send guards,
recheck intent, end what must not go; hold the rest until each due instant; write the attempt
record; send; record outcomes as each request returns; ack when every message is terminal in the
database. The frame is the unit of redelivery: whatever is unacked when a consumer dies comes
back, and the guards make sure nothing is sent twice.

This module is the intake, supervision and shutdown; the jobs it is assembled from are one
module each: ``consumer.core`` (shared state, terminal writes, acks, releases),
``consumer.prepare`` (the lead time) and ``consumer.dispatch`` (the due instant).
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pymongo.database import Database

from consumer.attempts import AttemptLog
from consumer.core import Batch
from consumer.pending import PendingCache
from consumer.prepare import Preparing
from consumer.recorder import Recorder
from consumer.timers import Timers
from shared import metrics
from shared.broker import Frame, StompClient
from shared.clock import Budget, Clock, instant_ms, utcnow
from shared.domain.backoff import compute_backoff
from shared.domain.messages import Doc
from shared.errors import TransientError
from shared.expo.pushes import Sender
from shared.lifecycle import MARGIN_S
from shared.settings import Settings
from shared.wire import SIGNATURE_HEADER, WireError, check_signature, decode

log = logging.getLogger(__name__)

# Journal entries older than this belong to no consumer still about to merge them.
JOURNAL_ORPHAN_S = 60.0


class Consumer(Preparing):
    """Competing consumer on the categories' queues. ``run()`` supervises and reconnects."""

    def __init__(
        self,
        settings: Settings,
        database: Database[Doc],
        sender: Sender,
        *,
        categories: list[str] | None = None,
        clock: Clock = utcnow,
        consumer_id: str | None = None,
        client_factory: Callable[..., StompClient] = StompClient,
    ) -> None:
        self.settings = settings
        self.db = database
        self.sender = sender
        self.categories = categories or list(settings.categories)
        for c in self.categories:
            if c not in settings.categories:
                raise ValueError(
                    f"unknown category {c!r} (configured: {', '.join(settings.categories)})"
                )
        self.clock = clock
        self.cid = consumer_id or f"consumer-{uuid.uuid4().hex[:8]}"
        self._client_factory = client_factory
        self._client: StompClient | None = None
        self._inbox: queue.Queue[Frame] = queue.Queue()
        self._timers = Timers(clock, f"{self.cid}-timers")
        self._prep = ThreadPoolExecutor(2, thread_name_prefix="prep")
        self._dispatch = ThreadPoolExecutor(8, thread_name_prefix="dispatch")
        self._in_flight: set[str] = set()
        self._attempts = AttemptLog(database, self.cid, clock)
        self._recorder = Recorder(
            database,
            max_failures=settings.consumer.max_token_failures,
            clock=clock,
            receipts_delay_s=settings.consumer.receipts_delay_s,
            busy=lambda: bool(self._in_flight),
            consumer=self.cid,
            release_attempts=self._attempts.release,
        )
        self._pending = PendingCache(
            database, span_s=settings.creator.wakeup_window_seconds + 5, clock=clock
        )
        self._batches: dict[str, Batch] = {}
        self._lock = threading.Lock()
        self._rng = random.Random()
        self.stop_event = threading.Event()
        self.fenced: str | None = None
        key = settings.stomp.signing_key
        self._signing_key = key.get_secret_value() if key is not None else None
        self._closing = False  # shutdown began: prepare nothing more, release instead
        self._changes_lock = threading.Lock()
        self._changes: set[str] = set()
        self._changes_at = None
        self.stats: dict[str, int] = defaultdict(int)

    # -- supervising loop --------------------------------------------------------------------
    def run(self, *, burst: bool = False, idle_s: float = 2.0) -> int:
        """Consume until stopped (or, in burst mode, until nothing is due and all is recorded).

        Returns 1 when a takeover fenced this consumer (it stopped; restart it), else 0."""
        attempt = 0
        try:
            while not self.stop_event.is_set():
                try:
                    self._merge_journal(older_than_s=JOURNAL_ORPHAN_S)
                    self._connect()
                    attempt = 0
                    if self._consume(burst, idle_s):
                        break
                except TransientError as exc:
                    attempt += 1
                    delay = compute_backoff(attempt, 0.5, 15.0, self._rng)
                    log.warning("%s; reconnecting in %.1f s", exc, delay)
                    self._abandon_held()
                    self.stop_event.wait(delay)
            self._shutdown()
        finally:
            self._close()
        return 1 if self.fenced else 0

    def stop(self) -> None:
        self.stop_event.set()

    def _connect(self) -> None:
        self._close()
        self._inbox = queue.Queue()
        client = self._client_factory(self.settings, inbox=self._inbox)
        client.connect()
        for cat in self.categories:
            client.subscribe(self.settings.queue(cat), prefetch=self.settings.consumer.prefetch)
        self._client = client
        log.info("%s consuming %s", self.cid, ", ".join(self.categories))

    def _close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _consume(self, burst: bool, idle_s: float) -> bool:
        """Process frames; True when a burst run is finished."""
        idle = Budget(idle_s)
        while not self.stop_event.is_set():
            client = self._client
            if client is None or not client.connected:
                raise TransientError("lost the broker connection")
            try:
                frame = self._inbox.get(timeout=0.2)
            except queue.Empty:
                if burst and idle.spent() and self._idle():
                    return True
                continue
            if self.stop_event.is_set():
                break  # stopping: left unacked, the broker gives it to another consumer
            idle = Budget(idle_s)
            self._on_frame(frame)
        return False

    def _idle(self) -> bool:
        with self._lock:
            return not self._batches and self._recorder.backlog == 0

    # -- per frame ---------------------------------------------------------------------------
    def _on_frame(self, frame: Frame) -> None:
        """Take one frame: anything that is not a valid, authentic wake-up of a configured
        category is dead-lettered with one log line, and the consumer goes on."""
        try:
            if self._signing_key is not None:
                signature = frame.headers.get(SIGNATURE_HEADER)
                check_signature(frame.body, signature, self._signing_key)
            wake = decode(frame.body)
            if wake.category not in self.settings.categories:
                raise WireError("unknown_category", f"unknown category {wake.category[:64]!r}")
        except WireError as exc:
            self._dead_letter(frame, exc.kind, str(exc))
            return
        except Exception:
            log.exception("bug while taking frame %s; dead-lettering it", frame.message_id)
            self._dead_letter(frame, "consumer_error", "consumer error while decoding")
            return
        metrics.WAKEUPS.labels(wake.category, "received").inc()
        batch = Batch(frame, wake)
        key = f"{frame.message_id}:{frame.ack_id}"
        with self._lock:
            self._batches[key] = batch
        lead_ms = int(self.settings.creator.lead_seconds * 1000)
        self._timers.at(
            instant_ms(wake.first_due_ms - lead_ms),
            lambda: self._prep.submit(self._prepare, key, batch),
        )

    # -- release and shutdown ------------------------------------------------------------------
    def _abandon_held(self) -> None:
        """After losing the broker: give every wake-up back (its frame will be redelivered)."""
        self._timers.cancel_all()
        with self._lock:
            batches = list(self._batches.values())
            self._batches.clear()
        for b in batches:
            with b.lock:
                unsent = [i for i in b.wake.items if i.id in b.open]
            self._release(b, unsent)
        metrics.HELD.set(0)

    def _shutdown(self) -> None:
        """Finish what is due within the shutdown timeout, release the rest, then return."""
        budget = Budget(self.settings.consumer.shutdown_timeout_s)
        # Batches not yet prepared are left to other consumers (their frames are not acked);
        # a preparation under way finishes its round trip and releases what it took.
        self._closing = True
        self._prep.shutdown(wait=True, cancel_futures=True)
        nxt = self._timers.next_at()
        while nxt is not None and nxt <= self.clock() + dt.timedelta(seconds=budget.left()):
            time.sleep(min(0.1, budget.left()))
            nxt = self._timers.next_at()
            if budget.spent():
                break
        self._timers.cancel_all()
        self._dispatch.shutdown(wait=True)
        self._recorder.wait_idle(max(0.5, budget.left()))
        with self._lock:
            batches = list(self._batches.values())
        free: list[str] = []
        for b in batches:
            with b.lock:
                if b.acked:
                    continue
                b.released = True
                free += [i for i in b.open if i not in b.claimed]
        # One write for every batch, within what is left of the budget plus most of the
        # margin before the stop deadline (shared/lifecycle.py): a database that does not answer
        # costs at most that, and what stays guarded is left for a takeover. Releasing matters:
        # a takeover re-checks guards one by one, a free guard is taken in one write.
        self._release_guards(free, budget_s=max(0.2, budget.left() + 0.7 * MARGIN_S))
        self._recorder.stop(timeout=max(0.2, budget.left()))
        self._timers.stop()
        log.info("%s stopped: %d batches done", self.cid, self.stats["batches"])
