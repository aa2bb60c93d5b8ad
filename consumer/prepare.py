"""Preparation: the consumer's work in the lead time before a wake-up's first due instant.

Check which ids are still pending (one index range shared by a whole herd: ``PendingCache``),
take the send guards (or take over a stopped holder's: ``consumer.takeover``), recheck intent
(``consumer.judge``), end what must not go, build the payloads, and arm a timer per due instant
for what is left. So at the due instant only the requests remain.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import defaultdict

from pymongo.errors import PyMongoError

from consumer.core import Batch
from consumer.dispatch import Dispatching
from consumer.takeover import take_over
from shared import metrics
from shared.clock import instant_ms
from shared.domain.backoff import compute_backoff
from shared.domain.messages import Status
from shared.errors import TransientError
from shared.store import db as dbm
from shared.store import guards
from shared.wire import Item, WakeUp

log = logging.getLogger("consumer.worker")


class Preparing(Dispatching):
    """The preparation job of ``consumer.worker.Consumer``."""

    def _prepare(self, key: str, batch: Batch) -> None:
        attempt = 0
        while not batch.released and not self._closing:
            try:
                self._prepare_once(key, batch)
                return
            except (TransientError, PyMongoError) as exc:
                attempt += 1
                delay = compute_backoff(attempt, 0.2, 5.0, self._rng)
                log.warning(
                    "preparing wake-up %s failed (%s); retry in %.1f s", batch.wake.id, exc, delay
                )
                time.sleep(delay)
            except Exception:
                log.exception("bug while preparing wake-up %s", batch.wake.id)
                self._dead_letter_batch(key, batch, "consumer error while preparing")
                return

    def _prepare_once(self, key: str, batch: Batch) -> None:
        w = batch.wake
        now = self.clock()
        items = list(w.items)
        with dbm.translate_errors("preparing a wake-up"):
            first = min(i.due for i in items)
            last = max(i.due for i in items)
            pending = self._pending.pending(first, last, w.planned_ms)
            live = [i for i in items if i.id in pending]
            stale = [i for i in items if i.id not in pending]
            if stale:
                live += self._resolve_stale(key, batch, stale)
            ours = guards.take_guards(self.db, [i.id for i in live], self.cid, now, wakeup=w.id)
            others = [i for i in live if i.id not in ours]
            if others and (batch.frame.redelivered or w.takeover):
                ours |= take_over(
                    self.db,
                    others,
                    self.cid,
                    now,
                    w.id,
                    held_here=self._holds,
                    merge_journal_of=lambda owner: self._merge_journal(consumer=owner),
                )
            mine = [i for i in live if i.id in ours]
            metrics.CLAIMS.labels(w.category, "taken").inc(len(mine))
            metrics.CLAIMS.labels(w.category, "skipped").inc(len(items) - len(mine))
            with batch.lock:
                batch.open = {i.id for i in mine}
            try:
                ends, keep = self._judge(w, mine, now, self._changed_since(w.planned_ms), False)
            except (TransientError, PyMongoError):
                raise  # retried by ``_prepare`` with the guards kept
            except Exception:
                # A bug in the intent check (bad data is a verdict, not an exception): the
                # wake-up is dead-lettered by ``_prepare``, so give back the guards just taken
                # first; nothing of them left, and none stays guarded by nobody.
                self._release(batch, mine)
                raise
            groups: dict[int, list[Item]] = defaultdict(list)
            for it in keep:
                groups[it.due_ms].append(it)
        # Token check, payload and size now, in the lead time: at the due instant only the
        # requests remain. What is already due (a late wake-up, a restart after an outage) goes
        # at once instead, built by the sending threads chunk by chunk while other chunks' requests
        # are out, so the first request does not wait for every payload of the wake-up.
        due_now = self._now_ms() + 50
        later = [i for i in keep if i.due_ms > due_now]
        for p in self.sender.prepare([self._push_of(w, i) for i in later]):
            batch.prepared[p.push.message_id] = p
        self._finish(key, batch, ends)
        if self._closing:  # shutdown began while preparing: give it back, unsent
            self._release(batch, keep)
            return
        metrics.HELD.inc(len(keep))
        for due_ms, its in groups.items():
            self._timers.at(
                instant_ms(due_ms),
                functools.partial(self._dispatch.submit, self._send, key, batch, its),
            )
        if not batch.open:
            self._maybe_ack(key, batch)

    def _resolve_stale(self, key: str, batch: Batch, stale: list[Item]) -> list[Item]:
        """Items not in the pending set: already handled (skip), unknown (dead-letter), or raced."""
        found = {
            d["_id"]: d
            for d in self.db[dbm.MESSAGES].find(
                {"_id": {"$in": [i.id for i in stale]}}, {"status": 1}
            )
        }
        unknown = [i for i in stale if i.id not in found]
        if unknown:
            bad = WakeUp(batch.wake.id, batch.wake.category, batch.wake.planned_ms, tuple(unknown))
            log.error(
                "wake-up %s names %d unknown message ids; dead-lettering them",
                batch.wake.id,
                len(unknown),
            )
            metrics.DLQ.labels("unknown_ids").inc()
            client = self._client
            if client is not None:
                client.send(
                    self.settings.dlq,
                    bad.encode(),
                    headers={"tzpush-reason": "unknown message ids"},
                )
        return [i for i in stale if found.get(i.id, {}).get("status") == Status.PENDING]
