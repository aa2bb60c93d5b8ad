"""Write outcomes to the database off the critical path, retrying until they are in.

The sender hands each request's outcomes over as soon as the request returns. They are made
durable at once in the send journal (``send_journal``: ticket ids included), group-committed: one
insert of one document (rows packed) for all requests that returned while the previous insert ran,
which costs the database next to nothing; the per-message updates (status, ticket, receipt
schedule), token hygiene and cap refunds are merged from the journal when no send is in flight
(or after ``max_defer_s``), so a herd's sends do not compete with a thousand document updates on
the database server. Then the batch's ``done`` callback acks the wake-up. A crash between journal
and merge loses nothing: ``merge_journal`` applies what is left (at start-up, before a takeover,
and in the janitor). A database outage only delays the writes: they are retried, never dropped.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError, PyMongoError

from shared import metrics
from shared.clock import Clock, utcnow
from shared.domain.backoff import compute_backoff
from shared.domain.messages import Doc, Status
from shared.domain.outcomes import TokenEffect, pack_journal, row_entries
from shared.errors import TransientError
from shared.store import db as dbm
from shared.store.journal import MERGE_CHUNK, CapRefunds, apply_outcomes, entry_ops

log = logging.getLogger(__name__)


@dataclass
class Job:
    updates: list[UpdateOne] = field(default_factory=list)
    effects: list[TokenEffect] = field(default_factory=list)
    outcomes: list[tuple[str, Status]] = field(default_factory=list)  # (category, status) metrics
    cap_refunds: CapRefunds = field(default_factory=CapRefunds)  # reservations to give back
    done: Callable[[], None] | None = None
    journal: list[list[Any]] | None = None  # outcome rows (ROW_FIELDS): journaled, merged later
    journal_at: dt.datetime = dt.datetime(
        1970, 1, 1, tzinfo=dt.UTC
    )  # when the request's outcomes came back
    journal_id: str = ""
    journaled_at: float = 0.0
    marker: str = ""  # a sent due group: its attempt records are released once its journal is in


_EMPTY = Job()


class Recorder:
    def __init__(
        self,
        database: Database[Doc],
        *,
        max_failures: int = 3,
        clock: Clock = utcnow,
        receipts_delay_s: float = 900.0,
        busy: Callable[[], bool] | None = None,
        max_defer_s: float = 5.0,
        consumer: str = "",
        release_attempts: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.db = database
        self.max_failures = max_failures
        self.receipts_delay_s = receipts_delay_s
        self._is_busy = busy or (lambda: False)
        self.max_defer_s = max_defer_s
        self.consumer = consumer
        self._release_attempts = release_attempts
        self._attempts_done: list[str] = []  # attempt records no longer needed, to delete
        self.clock = clock
        self._q: queue.Queue[Job | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._busy = 0
        self._lock = threading.Lock()
        self._rng = random.Random()
        self._thread = threading.Thread(target=self._loop, name="recorder", daemon=True)
        self._thread.start()

    def put(self, job: Job) -> None:
        with self._lock:
            self._busy += 1
            self._idle.clear()
        self._q.put(job)

    def wait_idle(self, timeout: float | None = None) -> bool:
        return self._idle.wait(timeout)

    @property
    def backlog(self) -> int:
        return self._busy

    def stop(self, timeout: float = 30.0) -> None:
        """Let queued writes finish for at most ``timeout`` seconds in all, then stop. What is
        not written by then is in the journal (merged by whoever comes next) or was never sent."""
        deadline = time.monotonic() + timeout
        self.wait_idle(timeout)
        self._q.put(None)
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def _loop(self) -> None:
        journaled: list[Job] = []  # durable in the journal, not yet merged into messages
        while True:
            try:
                job = self._q.get(timeout=0.05 if journaled else None)
            except queue.Empty:
                job = _EMPTY
            if job is not None and job is not _EMPTY and job.journal is not None:
                # Group commit: every journal entry queued meanwhile goes in the same write (a
                # herd's requests return faster than one insert each can be made durable).
                batch, job = self._take_journal_jobs(job)
                self._retry(self._write_journal, batch)
                journaled.extend(batch)
                if job is _EMPTY:
                    self._merge_if_due(journaled)
                    continue
            if job is None:
                self._merge_all(journaled)
                self._retry(self._drop_attempts, None)
                return
            if job is not _EMPTY:
                self._retry(self._apply, job)
                self._complete([job])
            self._merge_if_due(journaled)

    def _take_journal_jobs(self, first: Job) -> tuple[list[Job], Job | None]:
        """``first`` and the journal jobs queued right behind it; then the next other job
        (``_EMPTY`` if none), which must wait for them to keep the queue's order."""
        batch = [first]
        while len(batch) < 64:
            try:
                nxt = self._q.get_nowait()
            except queue.Empty:
                return batch, _EMPTY
            if nxt is None or nxt.journal is None:
                return batch, nxt
            batch.append(nxt)
        return batch, _EMPTY

    def _merge_if_due(self, journaled: list[Job]) -> None:
        busy = self._is_busy()
        if journaled and (
            not busy or time.monotonic() - journaled[0].journaled_at > self.max_defer_s
        ):
            self._merge_all(journaled)
        if self._attempts_done and not busy:
            self._retry(self._drop_attempts, None)

    def _drop_attempts(self, _: None) -> None:
        with dbm.translate_errors("deleting attempt records"):
            self.db[dbm.ATTEMPTS].delete_many({"_id": {"$in": self._attempts_done}})
        self._attempts_done = []

    def _retry(self, fn: Callable[[Any], None], arg: Any) -> None:
        attempt = 0
        while True:
            try:
                fn(arg)
                return
            except (TransientError, PyMongoError) as exc:
                attempt += 1
                delay = compute_backoff(attempt, 0.2, 10.0, self._rng)
                log.warning(
                    "recording outcomes failed (%s); retry %d in %.1f s", exc, attempt, delay
                )
                time.sleep(delay)

    def _complete(self, jobs: list[Job]) -> None:
        for job in jobs:
            for cat, outcome in job.outcomes:
                metrics.MESSAGES.labels(cat, outcome).inc()
            if job.done is not None:
                try:
                    job.done()
                except Exception:
                    log.exception("batch completion callback failed")
            with self._lock:
                self._busy -= 1
                if self._busy == 0:
                    self._idle.set()

    def _write_journal(self, jobs: list[Job]) -> None:
        # One document for the whole group commit, its rows packed (see pack_journal). It is
        # deleted once all its jobs are merged (_merge_all). A retry re-inserts the same id: a
        # duplicate-key answer means the first try went through.
        doc_id = jobs[0].journal_id or uuid.uuid4().hex
        for job in jobs:
            job.journal_id = doc_id
        doc = {
            "_id": doc_id,
            "consumer": self.consumer,
            "at": self.clock(),
            "packed": pack_journal([(job.journal_at, job.journal or []) for job in jobs]),
        }
        try:
            with dbm.translate_errors("journaling outcomes"):
                dbm.critical(self.db, dbm.JOURNAL).insert_one(doc)
        except DuplicateKeyError:
            pass
        now = time.monotonic()
        for job in jobs:
            job.journaled_at = now

    def _merge_all(self, journaled: list[Job]) -> None:
        """Merge (and complete) journaled jobs in parts of about ``MERGE_CHUNK`` outcomes.

        A 10k herd merged as one part was one bulk write of 10,000 updates: about 15 s on the
        MongoDB-compatible server here, past the 30 s socket timeout when the server was loaded,
        and the retry started over. A part is a short write; a retry redoes only its part; each
        part's batches are acked as soon as it is in. A journal document is deleted once every
        job it holds is merged.
        """
        while journaled:
            k, n = 1, len(journaled[0].journal or [])
            while k < len(journaled) and n + len(journaled[k].journal or []) <= MERGE_CHUNK:
                n += len(journaled[k].journal or [])
                k += 1
            part = journaled[:k]
            later = {job.journal_id for job in journaled[k:]}
            self._retry(self._merge, (part, later))
            self._complete(part)
            del journaled[:k]

    def _merge(self, args: tuple[list[Job], set[str]]) -> None:
        jobs, keep_journal = args
        updates: list[UpdateOne] = []
        effects: list[TokenEffect] = []
        refunds = CapRefunds()
        for job in jobs:
            entries = row_entries(job.journal or [], job.journal_at, self.consumer)
            u, e, r = entry_ops(entries, self.receipts_delay_s)
            updates += u
            effects += e
            refunds.extend(r)
        self._apply(Job(updates, effects, [], refunds))
        with dbm.translate_errors("trimming the send journal"):
            done = [
                j for j in dict.fromkeys(job.journal_id for job in jobs) if j not in keep_journal
            ]
            if done:
                dbm.critical(self.db, dbm.JOURNAL).delete_many({"_id": {"$in": done}})

    def _apply(self, job: Job) -> None:
        with dbm.translate_errors("recording outcomes"):
            apply_outcomes(
                self.db,
                job.updates,
                job.effects,
                job.cap_refunds,
                self.max_failures,
                self.clock(),
            )
        if job.marker and self._release_attempts is not None:
            self._attempts_done += self._release_attempts(job.marker)
