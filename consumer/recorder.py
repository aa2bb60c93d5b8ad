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
import json
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

from shared import db as dbm
from shared import metrics
from shared.backoff import compute_backoff
from shared.db import record_changes
from shared.errors import TransientError

log = logging.getLogger(__name__)

Doc = dict[str, Any]
# Whole-request failures say nothing about the device: they do not count against the token.
REQUEST_LEVEL = (
    "HTTP",
    "TOO_MANY_REQUESTS",
    "network error",
    "UNAUTHORIZED",
    "client error",
    "invalid response",
    "VALIDATION_ERROR",
    "PUSH_TOO_MANY",
)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS = dt.timedelta(milliseconds=1)  # BSON dates hold milliseconds; packed journals the same


@dataclass
class TokenEffect:
    """What one push says about its token. ``pushed_at`` is when that push was made: outcomes
    (tickets, late receipts, a takeover's merge) arrive out of order, and "consecutive" failures
    are counted in push order, not in the order their news arrives."""

    token_id: str
    user_id: str
    kind: str  # "dead" | "fail" | "ok"
    reason: str = ""
    pushed_at: dt.datetime | None = None


@dataclass
class Job:
    updates: list[UpdateOne] = field(default_factory=list)
    effects: list[TokenEffect] = field(default_factory=list)
    outcomes: list[tuple[str, str]] = field(default_factory=list)  # (category, outcome) metrics
    cap_refunds: dict[str, int] = field(default_factory=dict)  # counter id -> reservations back
    done: Callable[[], None] | None = None
    journal: list[list[Any]] | None = None  # outcome rows (ROW_FIELDS): journaled, merged later
    journal_at: dt.datetime = _EPOCH  # when the request's outcomes came back
    journal_id: str = ""
    journaled_at: float = 0.0
    marker: str = ""  # a sent due group: its attempt records are released once its journal is in


_EMPTY = Job()
# Outcomes per merge write: ~0.7 s of the MongoDB-compatible server here (1.5 ms per update).
MERGE_CHUNK = 500


def entry_ops(
    entries: list[Doc], receipts_delay_s: float
) -> tuple[list[UpdateOne], list[TokenEffect], dict[str, int]]:
    """Message updates, token effects and cap refunds for journal entries (pure)."""
    updates: list[UpdateOne] = []
    effects: list[TokenEffect] = []
    refunds: dict[str, int] = {}
    for e in entries:
        at: dt.datetime = e["at"]
        lateness = int((at.timestamp() * 1000) - e["due"])
        if e["ok"]:
            fields: Doc = {
                "status": "success",
                "ticketId": e["ticket"],
                "sentAt": at,
                "finishedAt": at,
                "lateness_ms": lateness,
                "reason": "accepted by Expo",
                "receipt": {
                    "state": "pending",
                    "checkAfter": at + dt.timedelta(seconds=receipts_delay_s),
                },
            }
            effects.append(TokenEffect(e["token"], e["user"], "ok", pushed_at=at))
        else:
            fields = {
                "status": "failed",
                "finishedAt": at,
                "lateness_ms": lateness,
                "reason": e.get("message") or e.get("error") or "failed",
                "error": e.get("error"),
            }
            if e.get("error") == "DeviceNotRegistered":
                effects.append(
                    TokenEffect(e["token"], e["user"], "dead", "DeviceNotRegistered", at)
                )
            elif counts_against_token(e.get("error")):
                effects.append(TokenEffect(e["token"], e["user"], "fail", e.get("error") or "", at))
            if e.get("cap"):
                key = f"{e['user']}:{e['ld']}"
                refunds[key] = refunds.get(key, 0) + 1
        fields.update(consumer=e.get("consumer"), attempts=e.get("attempts", 1))
        updates.append(UpdateOne({"_id": e["id"]}, {"$set": fields}))
    return updates, effects, refunds


# A journal row: what one push's outcome needs to be merged, the fields that differ between
# the pushes of one request. The request's instant and consumer are stored once beside its rows.
ROW_FIELDS = (
    *("id", "ok", "ticket", "error", "message", "attempts"),
    *("token", "user", "cap", "ld", "due"),
)


def row_entries(rows: list[list[Any]], at: dt.datetime, consumer: str) -> list[Doc]:
    """The entries (what ``entry_ops`` reads) of one request's journal rows."""
    return [{**dict(zip(ROW_FIELDS, r, strict=True)), "at": at, "consumer": consumer} for r in rows]


def pack_journal(requests: list[tuple[dt.datetime, list[list[Any]]]]) -> bytes:
    """Requests' journal rows as one compact JSON value: ``[[at_ms, rows], ...]``.

    Thousands of small sub-documents cost the database a decode each and the consumer an encode
    each, in the middle of a herd (a third of the MongoDB-compatible server's CPU here); one
    binary value of plain rows costs one. Nothing queries inside it: it is read back whole.
    """
    return json.dumps(
        [[(at - _EPOCH) // _MS, rows] for at, rows in requests], separators=(",", ":")
    ).encode()


def journal_entries(doc: Doc) -> list[Doc]:
    """The entries of a journal document (``entries`` as written before they were packed)."""
    if "packed" not in doc:
        return list(doc.get("entries") or [])
    entries: list[Doc] = []
    for at_ms, rows in json.loads(doc["packed"]):
        entries += row_entries(rows, _EPOCH + at_ms * _MS, doc.get("consumer", ""))
    return entries


def merge_journal(
    database: Database[Doc],
    *,
    receipts_delay_s: float,
    max_failures: int,
    consumer: str | None = None,
    older_than_s: float | None = None,
) -> int:
    """Apply journal entries left by a consumer that stopped before merging them.

    ``consumer`` limits it to one (dead) consumer's entries; ``older_than_s`` to entries no live
    consumer is still about to merge. Returns how many messages were updated.
    """
    flt: Doc = {}
    if consumer is not None:
        flt["consumer"] = consumer
    if older_than_s is not None:
        flt["at"] = {"$lt": dt.datetime.now(dt.UTC) - dt.timedelta(seconds=older_than_s)}
    n = 0
    with dbm.translate_errors("merging the send journal"):
        for doc in database[dbm.JOURNAL].find(flt):
            updates, effects, refunds = entry_ops(journal_entries(doc), receipts_delay_s)
            apply_outcomes(
                database, updates, effects, refunds, max_failures, dt.datetime.now(dt.UTC)
            )
            database[dbm.JOURNAL].delete_one({"_id": doc["_id"]})
            n += len(updates)
    if n:
        log.info("merged %d outcomes left in the send journal", n)
    return n


class Recorder:
    def __init__(
        self,
        database: Database[Doc],
        *,
        max_failures: int = 3,
        clock: Callable[[], dt.datetime] | None = None,
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
        self.clock = clock or (lambda: dt.datetime.now(dt.UTC))
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
        self.wait_idle(timeout)
        self._q.put(None)
        self._thread.join(timeout=5)

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
                self.db[dbm.JOURNAL].insert_one(doc)
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
        refunds: dict[str, int] = {}
        for job in jobs:
            entries = row_entries(job.journal or [], job.journal_at, self.consumer)
            u, e, r = entry_ops(entries, self.receipts_delay_s)
            updates += u
            effects += e
            for k, v in r.items():
                refunds[k] = refunds.get(k, 0) + v
        self._apply(Job(updates, effects, [], refunds))
        with dbm.translate_errors("trimming the send journal"):
            done = [
                j for j in dict.fromkeys(job.journal_id for job in jobs) if j not in keep_journal
            ]
            if done:
                self.db[dbm.JOURNAL].delete_many({"_id": {"$in": done}})

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


def apply_outcomes(
    database: Database[Doc],
    updates: list[UpdateOne],
    effects: list[TokenEffect],
    cap_refunds: dict[str, int],
    max_failures: int,
    now: dt.datetime,
) -> None:
    """Message updates, cap refunds (counter id -> reservations back) and token hygiene."""
    for i in range(0, len(updates), MERGE_CHUNK):  # short writes: see Recorder._merge_all
        database[dbm.MESSAGES].bulk_write(updates[i : i + MERGE_CHUNK], ordered=False)
    for key, n in cap_refunds.items():
        database[dbm.COUNTERS].update_one({"_id": key}, {"$inc": {"count": -n}})
    if effects:
        apply_token_effects(database, effects, max_failures, now)


def apply_token_effects(
    database: Database[Doc], effects: list[TokenEffect], max_failures: int, now: dt.datetime
) -> None:
    """Token hygiene: dead tokens off at once, N failures in a row off, a success resets.

    "In a row" is by push instant, whatever order the outcomes arrive in: a failure counts only
    if no success pushed after it has reset the count (``failureResetAt``), and a success resets
    only if no failure pushed after it has been counted (``lastFailureAt``). A late receipt for
    an old push therefore cannot wipe out newer failures, nor an old failure add to a newer run.
    """
    changed: set[str] = set()
    tokens = database[dbm.TOKENS]
    ordered = sorted(effects, key=lambda e: e.pushed_at or now)
    failing: set[str] | None = None  # tokens with failures, looked up once if a success needs it
    for e in ordered:
        at = e.pushed_at or now
        if e.kind == "dead":
            r = tokens.update_one(
                {"_id": e.token_id, "isActive": True},
                {
                    "$set": {
                        "isActive": False,
                        "deactivatedAt": now,
                        "updatedAt": now,
                        "deactivationReason": e.reason or "DeviceNotRegistered",
                    }
                },
            )
            if r.modified_count:
                metrics.TOKENS_DEACTIVATED.labels("DeviceNotRegistered").inc()
                changed.add(e.user_id)
        elif e.kind == "fail":
            doc = tokens.find_one_and_update(
                {
                    "_id": e.token_id,
                    "$or": [
                        {"failureResetAt": {"$exists": False}},
                        {"failureResetAt": {"$lte": at}},
                    ],
                },
                {
                    "$inc": {"failureCount": 1},
                    "$max": {"lastFailureAt": at},
                    "$set": {"updatedAt": now},
                },
                return_document=True,
            )
            if doc is None:
                continue  # a success pushed later already reset the run this belonged to
            if failing is not None:
                failing.add(e.token_id)
            if doc.get("isActive") and int(doc.get("failureCount", 0)) >= max_failures:
                tokens.update_one(
                    {"_id": e.token_id, "isActive": True},
                    {
                        "$set": {
                            "isActive": False,
                            "deactivatedAt": now,
                            "deactivationReason": f"{max_failures} consecutive failures "
                            f"(last: {e.reason})",
                        }
                    },
                )
                metrics.TOKENS_DEACTIVATED.labels("consecutive_failures").inc()
                changed.add(e.user_id)
        elif e.kind == "ok":
            if failing is None:
                # Only tokens that have failures need a reset: a small partial index finds them.
                failing = {
                    d["_id"]
                    for d in tokens.find({"failureCount": {"$gt": 0}}, {"_id": 1}).hint(
                        "failing_tokens"
                    )
                }
            if e.token_id not in failing:
                continue
            r = tokens.update_one(
                {
                    "_id": e.token_id,
                    "failureCount": {"$gt": 0},
                    "$or": [
                        {"lastFailureAt": {"$exists": False}},
                        {"lastFailureAt": {"$lte": at}},
                    ],
                },
                {"$set": {"failureCount": 0, "updatedAt": now}, "$max": {"failureResetAt": at}},
            )
            if r.modified_count:
                failing.discard(e.token_id)
    if changed:
        record_changes(database, changed, now)


def is_request_level(error: str | None) -> bool:
    return bool(error) and str(error).startswith(REQUEST_LEVEL)


# The payload's fault, not the device's: a too-big or invalid message says nothing about the token.
PAYLOAD_ERRORS = ("MessageTooBig", "InvalidPayload")


def counts_against_token(error: str | None) -> bool:
    """Whether a failed push is the device's problem (3 in a row deactivate the token)."""
    return bool(error) and not is_request_level(error) and error not in PAYLOAD_ERRORS
