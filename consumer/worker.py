"""The consumer: take wake-ups, prepare before the due instant, send at it, account for all.

Per wake-up (docs/architecture.md): decode (else dead-letter); at ``lead`` before the first due
instant, check which ids are still pending (one shared index range), take the send guards,
recheck intent, end what must not go; hold the rest until each due instant; write the attempt
record; send; record outcomes as each request returns; ack when every message is terminal in the
database. The frame is the unit of redelivery: whatever is unacked when a consumer dies comes
back, and the guards make sure nothing is sent twice.

``Consumer`` wires small parts, one module each, and keeps supervision and shutdown:
``consumer.intake`` (frames in), ``consumer.prepare`` (the lead time), ``consumer.dispatch``
(the due instant), ``consumer.recording`` (terminal writes, acks, releases) over the
``consumer.recorder`` thread, with ``consumer.state`` the little they share. A replay's wake-up
(taken by the API or the console) goes to ``consumer.replays`` on its own thread instead.
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
from concurrent.futures import Executor, ThreadPoolExecutor

from consumer.attempts import AttemptLog
from consumer.checks import IntentCheck
from consumer.dispatch import Dispatch
from consumer.intake import Intake
from consumer.link import BrokerLink
from consumer.pending import PendingCache
from consumer.prepare import Preparation
from consumer.recorder import Recorder
from consumer.recording import Recording
from consumer.replays import ReplaySends
from consumer.state import Held
from consumer.timers import Timers
from shared import metrics
from shared.broker import Frame, StompClient
from shared.clock import Budget, Clock, utcnow
from shared.domain.backoff import compute_backoff
from shared.errors import TransientError
from shared.expo.pushes import Sender
from shared.lifecycle import MARGIN_S
from shared.settings import Settings
from shared.store.abc import ConsumerStores
from shared.store.mongo import Stores, stores_of

log = logging.getLogger(__name__)

# Journal entries older than this belong to no consumer still about to merge them.
JOURNAL_ORPHAN_S = 60.0


def thread_pool(workers: int, name: str) -> Executor:
    return ThreadPoolExecutor(workers, thread_name_prefix=name)


class Consumer:
    """Competing consumer on the categories' queues. ``run()`` supervises and reconnects."""

    def __init__(
        self,
        settings: Settings,
        database: Stores,
        sender: Sender,
        *,
        categories: list[str] | None = None,
        clock: Clock = utcnow,
        consumer_id: str | None = None,
        client_factory: Callable[..., StompClient] = StompClient,
        timers: Timers | None = None,
        executor: Callable[[int, str], Executor] = thread_pool,
    ) -> None:
        """``timers`` and ``executor`` (``executor(workers, name)``) let a test run every part
        in its own thread: ``Timers(clock, thread=False)`` and an executor that runs at once."""
        self.settings = settings
        self.categories = categories or list(settings.categories)
        for c in self.categories:
            if c not in settings.categories:
                raise ValueError(
                    f"unknown category {c!r} (configured: {', '.join(settings.categories)})"
                )
        self.clock = clock
        self.cid = consumer_id or f"consumer-{uuid.uuid4().hex[:8]}"
        self._client_factory = client_factory
        self._inbox: queue.Queue[Frame] = queue.Queue()
        self._rng = random.Random()
        self.stop_event = threading.Event()
        self.fenced: str | None = None  # set once a takeover fenced this consumer: it stops
        self.stats: dict[str, int] = defaultdict(int)
        self.held = Held()
        self.link = BrokerLink(settings)
        self.timers = timers or Timers(clock, f"{self.cid}-timers")
        self._prep = executor(2, "prep")
        self._dispatch = executor(8, "dispatch")
        self._replays = executor(1, "replay")
        stores = stores_of(database)
        self.attempts = AttemptLog(stores, self.cid, clock)
        self.recorder = Recorder(
            stores,
            max_failures=settings.outcomes.max_token_failures,
            clock=clock,
            receipts_delay_s=settings.outcomes.receipts_delay_s,
            busy=self.held.sending,
            consumer=self.cid,
            release_attempts=self.attempts.release,
        )
        self.checks = IntentCheck(settings, stores, clock)
        self.recording = Recording(
            settings,
            stores,
            cid=self.cid,
            clock=clock,
            held=self.held,
            link=self.link,
            recorder=self.recorder,
            stats=self.stats,
        )
        self.dispatch = Dispatch(
            settings,
            sender,
            cid=self.cid,
            clock=clock,
            held=self.held,
            checks=self.checks,
            recording=self.recording,
            recorder=self.recorder,
            attempts=self.attempts,
            on_fenced=self._on_fenced,
            rng=self._rng,
        )
        self.preparation = Preparation(
            stores,
            sender,
            cid=self.cid,
            clock=clock,
            held=self.held,
            link=self.link,
            pending=PendingCache(
                stores.messages, span_s=settings.wakeup.window_seconds + 5, clock=clock
            ),
            checks=self.checks,
            recording=self.recording,
            timers=self.timers,
            dispatch=self.dispatch,
            dispatch_pool=self._dispatch,
            rng=self._rng,
        )
        # Replays are recorded on the messages in MongoDB; a consumer on the in-memory twin
        # has none and dead-letters a replay's wake-up.
        replays = (
            None
            if isinstance(database, ConsumerStores)
            else ReplaySends(
                database, settings, sender, cid=self.cid, clock=clock, recording=self.recording
            )
        )
        self.intake = Intake(
            settings,
            held=self.held,
            link=self.link,
            timers=self.timers,
            prep_pool=self._prep,
            prepare=self.preparation.prepare,
            replay=replays.send if replays is not None else None,
            replay_pool=self._replays,
        )

    # -- supervising loop --------------------------------------------------------------------
    def run(self, *, burst: bool = False, idle_s: float = 2.0) -> int:
        """Consume until stopped (or, in burst mode, until nothing is due and all is recorded).

        Returns 1 when a takeover fenced this consumer (it stopped; restart it), else 0."""
        if burst:
            log.info(
                "burst: draining the wake-ups the broker has already delivered, then exiting "
                "after %.1f s idle; wake-ups scheduled for later stay on the broker until their "
                "time",
                idle_s,
            )
        attempt = 0
        try:
            while not self.stop_event.is_set():
                try:
                    self.recording.merge_journal(older_than_s=JOURNAL_ORPHAN_S)
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

    def _on_fenced(self, exc: Exception) -> None:
        """Another consumer took over this one's guards: send nothing more, stop. A restart
        is a new consumer (a new id), so fencing never outlives the process it stopped."""
        if self.fenced is None:
            log.error("%s: %s; stopping (a restart is a new consumer)", self.cid, exc)
        self.fenced = str(exc)
        self.stop_event.set()

    def _connect(self) -> None:
        self._close()
        self._inbox = queue.Queue()
        client = self._client_factory(self.settings, inbox=self._inbox)
        client.connect()
        for cat in self.categories:
            client.subscribe(self.settings.queue(cat), prefetch=self.settings.consumer.prefetch)
        self.link.client = client
        log.info("%s consuming %s", self.cid, ", ".join(self.categories))

    def _close(self) -> None:
        if self.link.client is not None:
            self.link.client.close()
            self.link.client = None

    def _consume(self, burst: bool, idle_s: float) -> bool:
        """Process frames; True when a burst run is finished."""
        idle = Budget(idle_s)
        while not self.stop_event.is_set():
            if not self.link.connected():
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
            self.intake.on_frame(frame)
        return False

    def _idle(self) -> bool:
        return self.held.empty() and self.recorder.backlog == 0

    # -- release and shutdown ------------------------------------------------------------------
    def _abandon_held(self) -> None:
        """After losing the broker: give every wake-up back (its frame will be redelivered)."""
        self.timers.cancel_all()
        for b in self.held.take_all():
            with b.lock:
                unsent = [i for i in b.wake.items if i.id in b.open]
            self.recording.release(b, unsent)
        metrics.HELD.set(0)

    def _shutdown(self) -> None:
        """Finish what is due within the shutdown timeout, release the rest, then return."""
        budget = Budget(self.settings.shutdown.timeout_s)
        # Batches not yet prepared are left to other consumers (their frames are not acked);
        # a preparation under way finishes its round trip and releases what it took.
        self.held.closing = True
        self._prep.shutdown(wait=True, cancel_futures=True)
        self._replays.shutdown(wait=True, cancel_futures=True)  # the frames of those not begun
        nxt = self.timers.next_at()
        while nxt is not None and nxt <= self.clock() + dt.timedelta(seconds=budget.left()):
            time.sleep(min(0.1, budget.left()))
            nxt = self.timers.next_at()
            if budget.spent():
                break
        self.timers.cancel_all()
        self._dispatch.shutdown(wait=True)
        self.recorder.wait_idle(max(0.5, budget.left()))
        free: list[str] = []
        for b in self.held.all():
            with b.lock:
                if b.acked:
                    continue
                b.released = True
                free += [i for i in b.open if i not in b.claimed]
        # One write for every batch, within what is left of the budget plus most of the
        # margin before the stop deadline (shared/lifecycle.py): a database that does not answer
        # costs at most that, and what stays guarded is left for a takeover. Releasing matters:
        # a takeover re-checks guards one by one, a free guard is taken in one write.
        self.recording.release_guards(free, budget_s=max(0.2, budget.left() + 0.7 * MARGIN_S))
        self.recorder.stop(timeout=max(0.2, budget.left()))
        self.timers.stop()
        log.info("%s stopped: %d batches done", self.cid, self.stats["batches"])
