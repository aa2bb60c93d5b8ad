"""The consumer: take wake-ups, prepare before the due instant, send at it, account for all.

Per wake-up (docs/architecture.md): decode (else dead-letter); at ``lead`` before the first due
instant, check which ids are still pending (one shared index range), take the send guards,
recheck intent, end what must not go; hold the rest until each due instant; write the attempt
record; send; record outcomes as each request returns; ack when every message is terminal in the
database. The frame is the unit of redelivery: whatever is unacked when a consumer dies comes
back, and the guards make sure nothing is sent twice.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import queue
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database
from pymongo.errors import PyMongoError

from consumer import intent
from consumer.attempts import AttemptLog
from consumer.pending import PendingCache
from consumer.pushes import OutgoingPush, PreparedPush, PushOutcome, Sender
from consumer.recorder import Job, Recorder, merge_journal
from consumer.timers import Timers
from creator.janitor import maybe_sent, outcome_unknown, take_guards
from shared import db as dbm
from shared import metrics
from shared.backoff import compute_backoff
from shared.broker import Frame, StompClient
from shared.clock import Clock, utcnow
from shared.errors import TransientError
from shared.settings import Settings
from shared.wire import Item, WakeUp, WireError, decode

log = logging.getLogger(__name__)

Doc = dict[str, Any]
# Journal entries older than this belong to no consumer still about to merge them.
JOURNAL_ORPHAN_S = 60.0


@dataclass
class Batch:
    """One wake-up being worked on."""

    frame: Frame
    wake: WakeUp
    open: set[str] = field(default_factory=set)  # ids whose outcome is not yet in the database
    sending: set[str] = field(default_factory=set)
    released: bool = False
    acked: bool = False
    prepared: dict[str, PreparedPush] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Consumer:
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
        self._timers = Timers(f"{self.cid}-timers")
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
        self._pending = PendingCache(database, span_s=settings.creator.wakeup_window_seconds + 5)
        self._batches: dict[str, Batch] = {}
        self._lock = threading.Lock()
        self._rng = random.Random()
        self.stop_event = threading.Event()
        self._closing = False  # shutdown began: prepare nothing more, release instead
        self._changes_lock = threading.Lock()
        self._changes: set[str] = set()
        self._changes_at = float("-inf")
        self.stats: dict[str, int] = defaultdict(int)

    # -- supervising loop --------------------------------------------------------------------
    def run(self, *, burst: bool = False, idle_s: float = 2.0) -> int:
        """Consume until stopped (or, in burst mode, until nothing is due and all is recorded)."""
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
        return 0

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
        last = time.monotonic()
        while not self.stop_event.is_set():
            client = self._client
            if client is None or not client.connected:
                raise TransientError("lost the broker connection")
            try:
                frame = self._inbox.get(timeout=0.2)
            except queue.Empty:
                if burst and time.monotonic() - last > idle_s and self._idle():
                    return True
                continue
            if self.stop_event.is_set():
                break  # stopping: left unacked, the broker gives it to another consumer
            last = time.monotonic()
            self._on_frame(frame)
        return False

    def _idle(self) -> bool:
        with self._lock:
            return not self._batches and self._recorder.backlog == 0

    # -- per frame ---------------------------------------------------------------------------
    def _on_frame(self, frame: Frame) -> None:
        try:
            wake = decode(frame.body)
            if wake.category not in self.settings.categories:
                raise WireError(f"unknown category {wake.category!r}")
        except WireError as exc:
            self._dead_letter(frame, str(exc))
            return
        metrics.WAKEUPS.labels(wake.category, "received").inc()
        batch = Batch(frame, wake)
        key = f"{frame.message_id}:{frame.ack_id}"
        with self._lock:
            self._batches[key] = batch
        lead = self.settings.creator.lead_seconds
        wait_s = (wake.first_due_ms - lead * 1000 - self._now_ms()) / 1000
        self._timers.at(
            time.monotonic() + max(0.0, wait_s),
            lambda: self._prep.submit(self._prepare, key, batch),
        )

    def _dead_letter(self, frame: Frame, reason: str) -> None:
        log.error("dead-lettering wake-up %s: %s", frame.message_id, reason)
        metrics.DLQ.labels(reason.split(":")[0][:40]).inc()
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

    # -- preparation -------------------------------------------------------------------------
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
            ours = take_guards(self.db, [i.id for i in live], self.cid, now, wakeup=w.id)
            others = [i for i in live if i.id not in ours]
            if others and batch.frame.redelivered:
                ours |= self._take_over(others, now, w.id)
            mine = [i for i in live if i.id in ours]
            metrics.CLAIMS.labels(w.category, "taken").inc(len(mine))
            metrics.CLAIMS.labels(w.category, "skipped").inc(len(items) - len(mine))
            with batch.lock:
                batch.open = {i.id for i in mine}
            ends, keep = self._judge(
                w, mine, now, self._changed_since(w.planned_ms), reserve_caps=False
            )
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
            wait_s = (due_ms - self._now_ms()) / 1000
            self._timers.at(
                time.monotonic() + max(0.0, wait_s),
                functools.partial(self._dispatch.submit, self._send, key, batch, its),
            )
        if not batch.open:
            self._maybe_ack(key, batch)

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
            if time.monotonic() - self._changes_at > 1.0:
                back_ms = int((c.lead_seconds + c.wakeup_window_seconds + 60) * 1000)
                self._changes = self._changed_since(self._now_ms() - back_ms)
                self._changes_at = time.monotonic()
            return self._changes

    def _merge_journal(self, **kw: Any) -> int:
        return merge_journal(
            self.db,
            receipts_delay_s=self.settings.consumer.receipts_delay_s,
            max_failures=self.settings.consumer.max_token_failures,
            **kw,
        )

    def _changed_since(self, planned_ms: int) -> set[str]:
        return intent.changed_users(self.db, dt.datetime.fromtimestamp(planned_ms / 1000, dt.UTC))

    def _judge(
        self,
        w: WakeUp,
        items: list[Item],
        now: dt.datetime,
        changed: set[str],
        *,
        reserve_caps: bool = True,
    ) -> tuple[list[tuple[Item, str, str]], list[Item]]:
        """Split items into (terminal decisions, items to send).

        The daily cap is reserved only with ``reserve_caps`` (the final check just before
        sending): reserving at preparation too would count each message twice.
        """
        grace_s = self.settings.grace_seconds(w.category)
        grace_ms = grace_s * 1000
        now_ms = int(now.timestamp() * 1000)
        ends: list[tuple[Item, str, str]] = []
        keep: list[Item] = []
        full = [i for i in items if i.user in changed]
        users, reminders, tokens = intent.load_current(self.db, full) if full else ({}, {}, {})
        caps: dict[str, int | None] = {}
        for it in items:
            late_ms = now_ms - it.due_ms
            if late_ms > grace_ms:
                missed = f"{late_ms / 1000:.0f} s late, grace {grace_s:.0f} s"
                ends.append((it, "is_missed", missed))
                continue
            if it.user in changed:
                user = users.get(it.user)
                reason = intent.full_reason(
                    it, w.category, user, reminders.get(it.reminder), tokens.get(it.token_id)
                )
                caps[it.id] = (user or {}).get("dailyCap")
            else:
                reason = intent.snapshot_reason(it)
                caps[it.id] = it.cap
            if reason:
                ends.append((it, "cancelled", reason))
            else:
                keep.append(it)
        if reserve_caps and any(caps.get(i.id) for i in keep):
            over = intent.daily_cap_reasons(self.db, keep, caps)
            ends += [(i, "cancelled", over[i.id]) for i in keep if i.id in over]
            keep = [i for i in keep if i.id not in over]
        return ends, keep

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
            metrics.DLQ.labels("unknown ids").inc()
            client = self._client
            if client is not None:
                client.send(
                    self.settings.dlq,
                    bad.encode(),
                    headers={"tzpush-reason": "unknown message ids"},
                )
        return [i for i in stale if found.get(i.id, {}).get("status") == "pending"]

    def _take_over(self, others: list[Item], now: dt.datetime, wakeup: str) -> set[str]:
        """A redelivered frame: take over guards whose holder stopped before sending."""
        got: set[str] = set()
        merged: dict[str, set[str]] = {}
        for it in others:
            with self._lock:
                if it.id in self._in_flight:
                    continue
            guard = self.db[dbm.SENDS].find_one({"_id": it.id})
            if guard is None:  # released by its holder (shutdown or lost broker): take it
                got |= take_guards(self.db, [it.id], self.cid, now, wakeup=wakeup)
                continue
            owner = str(guard.get("owner"))
            if owner not in merged:
                # Outcomes the stopped holder journaled but never merged are the truth; its
                # attempt records say which messages may have left without an outcome.
                if owner != self.cid:
                    self._merge_journal(consumer=owner)
                merged[owner] = maybe_sent(self.db, owner)
            if (
                self.db[dbm.MESSAGES].find_one({"_id": it.id, "status": "pending"}, {"_id": 1})
                is None
            ):
                continue  # ended meanwhile (its journaled outcome was just merged): not ours
            if it.id in merged[owner]:
                self.db[dbm.MESSAGES].update_one(
                    {"_id": it.id, "status": "pending"},
                    {
                        "$set": {
                            "status": "failed",
                            "finishedAt": now,
                            "reason": outcome_unknown(owner),
                        }
                    },
                )
                continue
            r = self.db[dbm.SENDS].update_one(
                {"_id": it.id, "owner": guard.get("owner"), "at": guard.get("at")},
                {
                    "$set": {
                        "owner": self.cid,
                        "at": now,
                        "wakeup": wakeup,
                        "takenOverFrom": guard.get("owner"),
                    }
                },
            )
            if r.modified_count:
                got.add(it.id)
        return got

    # -- sending -----------------------------------------------------------------------------
    def _send(self, key: str, batch: Batch, items: list[Item]) -> None:
        if batch.released:
            return
        w = batch.wake
        now = self.clock()
        try:
            with dbm.translate_errors("final check before sending"):
                changed = self._recent_changes()
                ends, keep = self._judge(w, items, now, changed & {i.user for i in items})
                self._finish(key, batch, ends)
                if not keep:
                    return
        except (TransientError, PyMongoError) as exc:
            # Nothing has left yet: put the items back so a redelivery can take them.
            log.warning("final check for %s failed (%s); releasing it", w.id, exc)
            self._release(batch, items)
            return
        metrics.HELD.dec(len(items))
        with self._lock:
            self._in_flight.update(i.id for i in keep)
        by_id = {i.id: i for i in keep}
        pushes = [batch.prepared.get(i.id) or self._push_of(w, i) for i in keep]
        started_ms = self._now_ms()
        lateness = metrics.LATENESS.labels(w.category)
        for i in keep:
            lateness.observe(max(0, started_ms - i.due_ms) / 1000)
        try:
            # Each request's ids are recorded just before it goes out (group-committed: see
            # consumer/attempts.py), so a crash leaves only the requests in flight with an
            # unknown outcome; the records are released once the group's outcomes are journaled.
            marker = f"{self.cid}:{min(by_id)}"
            self.sender.send(
                pushes,
                on_chunk_done=lambda outs: self._record(key, batch, by_id, outs),
                before_request=lambda ids: self._attempts.mark(marker, ids),
            )
            # Queued behind the group's journal writes: once those are in, the record goes.
            self._recorder.put(Job(marker=marker))
        finally:
            with self._lock:
                self._in_flight.difference_update(by_id)

    def _record(
        self, key: str, batch: Batch, by_id: dict[str, Item], outs: list[PushOutcome]
    ) -> None:
        """Hand one request's outcomes to the recorder: journaled at once, merged later."""
        now = self.clock()
        w = batch.wake
        rows: list[list[Any]] = []  # recorder.ROW_FIELDS
        for o in outs:
            it = by_id[o.message_id]
            rows.append(
                [
                    it.id,
                    o.ok,
                    o.ticket_id,
                    o.error,
                    o.message,
                    o.attempts,
                    it.token_id,
                    it.user,
                    bool(it.cap),
                    it.local_date,
                    it.due_ms,
                ]
            )
        outcomes = [(w.category, "success" if o.ok else "failed") for o in outs]
        ids = [o.message_id for o in outs]
        self._recorder.put(
            Job(
                outcomes=outcomes,
                journal=rows,
                journal_at=now,
                done=lambda: self._close_ids(key, batch, ids),
            )
        )

    def _finish(self, key: str, batch: Batch, ends: list[tuple[Item, str, str]]) -> None:
        """Record terminal decisions taken without sending (cancelled, is_missed)."""
        if not ends:
            return
        now = self.clock()
        updates = [
            UpdateOne(
                {"_id": it.id, "status": "pending"},
                {
                    "$set": {
                        "status": status,
                        "reason": reason,
                        "finishedAt": now,
                        "consumer": self.cid,
                    }
                },
            )
            for it, status, reason in ends
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
            self._dead_letter(batch.frame, reason)
        finally:
            with self._lock:
                self._batches.pop(key, None)

    # -- release and shutdown ------------------------------------------------------------------
    def _release(self, batch: Batch, items: list[Item]) -> None:
        """Give back the guards of items we hold but will not send (shutdown, lost broker)."""
        ids = [i.id for i in items]
        try:
            self.db[dbm.SENDS].delete_many({"_id": {"$in": ids}, "owner": self.cid})
        except PyMongoError as exc:
            log.warning("could not release guards (%s); a redelivery will take them over", exc)
        batch.released = True

    def _abandon_held(self) -> None:
        """After losing the broker: drop every batch not yet sending; frames come back."""
        self._timers.cancel_all()
        with self._lock:
            batches = list(self._batches.values())
            self._batches.clear()
        for b in batches:
            with b.lock:
                unsent = [i for i in b.wake.items if i.id in b.open and i.id not in self._in_flight]
            self._release(b, unsent)
        metrics.HELD.set(0)

    def _shutdown(self) -> None:
        """Finish what is due within the shutdown timeout, release the rest, then return."""
        timeout = self.settings.consumer.shutdown_timeout_s
        deadline = time.monotonic() + timeout
        # Batches not yet prepared are left to other consumers (their frames are not acked);
        # a preparation under way finishes its round trip and releases what it took.
        self._closing = True
        self._prep.shutdown(wait=True, cancel_futures=True)
        nxt = self._timers.next_at()
        while nxt is not None and nxt <= deadline:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            nxt = self._timers.next_at()
            if time.monotonic() >= deadline:
                break
        self._timers.cancel_all()
        self._dispatch.shutdown(wait=True)
        self._recorder.wait_idle(max(0.5, deadline - time.monotonic()))
        with self._lock:
            batches = list(self._batches.values())
        for b in batches:
            with b.lock:
                unsent = [i for i in b.wake.items if i.id in b.open]
            if unsent and not b.acked:
                self._release(b, unsent)
        self._recorder.stop(timeout=5)
        self._timers.stop()
        log.info("%s stopped: %d batches done", self.cid, self.stats["batches"])

    def _now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)
