"""Write outcomes to the database off the critical path, retrying until they are in.

The sender hands each request's outcomes over as soon as the request returns; this thread turns
them into one bulk write per chunk plus token hygiene, and calls the batch's ``done`` callback
(which acks the wake-up once every message of it is terminal in the database). A database
outage only delays the writes: they are retried with back-off, never dropped.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database
from pymongo.errors import PyMongoError

from creator.manage import record_changes
from shared import db as dbm
from shared import metrics
from shared.backoff import compute_backoff
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


@dataclass
class TokenEffect:
    token_id: str
    user_id: str
    kind: str  # "dead" | "fail" | "ok"
    reason: str = ""


@dataclass
class Job:
    updates: list[UpdateOne]
    effects: list[TokenEffect] = field(default_factory=list)
    outcomes: list[tuple[str, str]] = field(default_factory=list)  # (category, outcome) metrics
    cap_refunds: dict[str, int] = field(default_factory=dict)  # counter id -> reservations back
    done: Callable[[], None] | None = None


class Recorder:
    def __init__(
        self,
        database: Database[Doc],
        *,
        max_failures: int = 3,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.db = database
        self.max_failures = max_failures
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
        while True:
            job = self._q.get()
            if job is None:
                return
            attempt = 0
            while True:
                try:
                    self._apply(job)
                    break
                except (TransientError, PyMongoError) as exc:
                    attempt += 1
                    delay = compute_backoff(attempt, 0.2, 10.0, self._rng)
                    log.warning(
                        "recording outcomes failed (%s); retry %d in %.1f s", exc, attempt, delay
                    )
                    time.sleep(delay)
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

    def _apply(self, job: Job) -> None:
        with dbm.translate_errors("recording outcomes"):
            if job.updates:
                self.db[dbm.MESSAGES].bulk_write(job.updates, ordered=False)
            for key, n in job.cap_refunds.items():
                self.db[dbm.COUNTERS].update_one({"_id": key}, {"$inc": {"count": -n}})
            if job.effects:
                apply_token_effects(self.db, job.effects, self.max_failures, self.clock())


def apply_token_effects(
    database: Database[Doc], effects: list[TokenEffect], max_failures: int, now: dt.datetime
) -> None:
    """Token hygiene: dead tokens off at once, N failures in a row off, a success resets."""
    changed: set[str] = set()
    tokens = database[dbm.TOKENS]
    for e in effects:
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
                {"_id": e.token_id},
                {"$inc": {"failureCount": 1}, "$set": {"updatedAt": now}},
                return_document=True,
            )
            if doc and doc.get("isActive") and int(doc.get("failureCount", 0)) >= max_failures:
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
    ok_ids = {e.token_id for e in effects if e.kind == "ok"}
    if ok_ids:
        # Only tokens that have failures need a reset: a small partial index finds them.
        failing = {
            d["_id"]
            for d in tokens.find({"failureCount": {"$gt": 0}}, {"_id": 1}).hint("failing_tokens")
        }
        for tid in ok_ids & failing:
            tokens.update_one({"_id": tid}, {"$set": {"failureCount": 0, "updatedAt": now}})
    if changed:
        record_changes(database, changed, now)


def is_request_level(error: str | None) -> bool:
    return bool(error) and str(error).startswith(REQUEST_LEVEL)


# The payload's fault, not the device's: a too-big or invalid message says nothing about the token.
PAYLOAD_ERRORS = ("MessageTooBig", "InvalidPayload")


def counts_against_token(error: str | None) -> bool:
    """Whether a failed push is the device's problem (3 in a row deactivate the token)."""
    return bool(error) and not is_request_level(error) and error not in PAYLOAD_ERRORS
