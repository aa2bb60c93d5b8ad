"""Preparation: the consumer's work in the lead time before a wake-up's first due instant.

Check which ids are still pending (one index range shared by a whole herd: ``PendingCache``),
take the send guards (or take over a stopped holder's: ``consumer.takeover``), recheck intent
(``consumer.checks``), end what must not go, build the payloads, and arm a timer per due instant
for what is left. So at the due instant only the requests remain.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections import defaultdict
from concurrent.futures import Executor

from consumer.checks import IntentCheck
from consumer.dispatch import Dispatch
from consumer.link import BrokerLink
from consumer.pending import PendingCache
from consumer.recording import Recording
from consumer.state import Batch, Held, push_of
from consumer.takeover import take_over
from consumer.timers import Timers
from shared import metrics
from shared.clock import Clock, instant_ms, ms_of
from shared.domain.backoff import compute_backoff
from shared.domain.messages import Status
from shared.errors import TransientError
from shared.expo.pushes import Sender
from shared.store import db as dbm
from shared.store.abc import ConsumerStores
from shared.store.mongo import StoreError
from shared.wire import Item

log = logging.getLogger("consumer.worker")


class Preparation:
    def __init__(
        self,
        stores: ConsumerStores,
        sender: Sender,
        *,
        cid: str,
        clock: Clock,
        held: Held,
        link: BrokerLink,
        pending: PendingCache,
        checks: IntentCheck,
        recording: Recording,
        timers: Timers,
        dispatch: Dispatch,
        dispatch_pool: Executor,
        rng: random.Random,
    ) -> None:
        self.stores = stores
        self.sender = sender
        self.cid = cid
        self.clock = clock
        self.held = held
        self.link = link
        self.pending = pending
        self.checks = checks
        self.recording = recording
        self.timers = timers
        self.dispatch = dispatch
        self.dispatch_pool = dispatch_pool
        self.rng = rng

    def prepare(self, key: str, batch: Batch) -> None:
        """Prepare the wake-up, retrying database errors with back-off until it is given back
        or shutdown begins; a bug dead-letters it."""
        attempt = 0
        while not batch.released and not self.held.closing:
            try:
                self.prepare_once(key, batch)
                return
            except (TransientError, StoreError) as exc:
                attempt += 1
                delay = compute_backoff(attempt, 0.2, 5.0, self.rng)
                log.warning(
                    "preparing wake-up %s failed (%s); retry in %.1f s", batch.wake.id, exc, delay
                )
                time.sleep(delay)
            except Exception:
                log.exception("bug while preparing wake-up %s", batch.wake.id)
                self.recording.dead_letter_batch(key, batch, "consumer error while preparing")
                return

    def prepare_once(self, key: str, batch: Batch) -> None:
        """One try: claim, judge, end what must not go, arm a timer per due instant."""
        w = batch.wake
        now = self.clock()
        items = list(w.items)
        with dbm.translate_errors("preparing a wake-up"):
            first = min(i.due for i in items)
            last = max(i.due for i in items)
            pending = self.pending.pending(first, last, w.planned_ms)
            live = [i for i in items if i.id in pending]
            stale = [i for i in items if i.id not in pending]
            if stale:
                live += self._resolve_stale(batch, stale)
            kept = {i.id for i in live if i.id in batch.guarded}  # taken by an earlier try
            fresh = [i.id for i in live if i.id not in kept]
            ours = kept | self.stores.guards.take(fresh, self.cid, now, wakeup=w.id)
            others = [i for i in live if i.id not in ours]
            if others and (batch.frame.redelivered or w.takeover):
                ours |= take_over(
                    self.stores,
                    others,
                    self.cid,
                    now,
                    w.id,
                    held_here=self.held.holds,
                    merge_journal_of=lambda owner: self.recording.merge_journal(consumer=owner),
                )
            batch.guarded |= ours
            mine = [i for i in live if i.id in ours]
            metrics.CLAIMS.labels(w.category, "taken").inc(len(mine))
            metrics.CLAIMS.labels(w.category, "skipped").inc(len(items) - len(mine))
            with batch.lock:
                batch.open = {i.id for i in mine}
            try:
                changed = self.checks.changed_since(w.planned_ms)
                ends, keep = self.checks.judge(w, mine, now, changed, False)
            except (TransientError, StoreError):
                raise  # retried by ``prepare`` with the guards kept
            except Exception:
                # A bug in the intent check (bad data is a verdict, not an exception): the
                # wake-up is dead-lettered by ``prepare``, so give back the guards just taken
                # first; nothing of them left, and none stays guarded by nobody.
                self.recording.release(batch, mine)
                raise
            groups: dict[int, list[Item]] = defaultdict(list)
            for it in keep:
                groups[it.due_ms].append(it)
        # Token check, payload and size now, in the lead time: at the due instant only the
        # requests remain. What is already due (a late wake-up, a restart after an outage) goes
        # at once instead, built by the sending threads chunk by chunk while other chunks' requests
        # are out, so the first request does not wait for every payload of the wake-up.
        due_now = ms_of(self.clock) + 50
        later = [i for i in keep if i.due_ms > due_now]
        for p in self.sender.prepare([push_of(w, i) for i in later]):
            batch.prepared[p.push.message_id] = p
        self.recording.finish(key, batch, ends)
        if self.held.closing:  # shutdown began while preparing: give it back, unsent
            self.recording.release(batch, keep)
            return
        metrics.HELD.inc(len(keep))
        for due_ms, its in groups.items():
            self.timers.at(
                instant_ms(due_ms),
                functools.partial(self.dispatch_pool.submit, self.dispatch.send, key, batch, its),
            )
        if not batch.open:
            self.recording.maybe_ack(key, batch)

    def _resolve_stale(self, batch: Batch, stale: list[Item]) -> list[Item]:
        """Items not in the pending set: already handled (skip), unknown (dead-letter), or raced."""
        found = self.stores.messages.statuses([i.id for i in stale])
        unknown = [i for i in stale if i.id not in found]
        if unknown:
            self.link.park_unknown(batch.wake, unknown)
        return [i for i in stale if found.get(i.id) == Status.PENDING]
