"""``Idempotency-Key`` for POSTs that create: the same key and body within 24 h answer the same.

A record per (API key name, route, Idempotency-Key) (``shared.store.abc_web``): inserted before
the work (its ``_id`` is the claim, so two concurrent requests with one key cannot both run), with
the id of what the request creates, and completed with the answer. Then:
- the same key and the same body (a retry): the stored answer, with ``Idempotent-Replayed: true``;
- the same key and another body: 422, the key was used for something else;
- the same key while the first request still runs: 409, try again shortly.
A refused request (4xx) leaves no record, so it can be corrected and sent again under the same
key. A request cut by an outage (or a bug) may have written part of its work: its record stays,
its claim dated long ago, and the same request sent again takes it over and goes on under the
same id (so it finishes that resource instead of creating a second one). So does a request
whose process died (a claim older than ``STALE_CLAIM``), and one whose cut could not be written
(the outage refused that write too): the claim names the process that made it, and a process
that finds its own claim on a request it is not running takes it over at once (one it is still
running, however slow, it never takes over). Claims are dated and judged by the database
server's clock (this host's, corrected by its distance from the server's, read every few
minutes), so API hosts whose clocks disagree agree on what is stale. Records expire 24 h after
the key's first use (checked on read, and removed by a TTL index).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from api.problems import ApiProblem, field_error, invalid
from shared.clock import Clock, utcnow
from shared.store.abc_web import IdempotencyRecords

TTL = dt.timedelta(hours=24)
STALE_CLAIM = dt.timedelta(seconds=60)
LONG_AGO = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)  # a cut claim: stale for any process
SKEW_READ_EVERY = dt.timedelta(minutes=5)  # how often the server's clock is read again
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class Stored:
    status: int
    body: Any


@dataclass(frozen=True)
class Claim:
    """Go ahead: create ``resource_id``, the same id on every attempt under this key."""

    resource_id: str


def check_key(key: str) -> str:
    if not 1 <= len(key) <= MAX_KEY_LENGTH or not all(33 <= ord(c) <= 126 for c in key):
        raise invalid(
            [
                field_error(
                    "Idempotency-Key",
                    f"must be 1 to {MAX_KEY_LENGTH} printable ASCII characters without spaces",
                    "header",
                )
            ]
        )
    return key


def fingerprint(*parts: Any) -> str:
    raw = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


class IdempotencyStore:
    """The rule above over ``records`` (``shared.store.abc_web``), for this process."""

    def __init__(self, records: IdempotencyRecords, clock: Clock = utcnow) -> None:
        self.records = records
        self.clock = clock
        self.owner = uuid.uuid4().hex  # this process, in the claims it makes
        self._running: dict[str, str] = {}  # record -> attempt, of this process's requests
        self._lock = threading.Lock()
        self._now = records.clock(clock, SKEW_READ_EVERY)  # the server's, as all agree

    @staticmethod
    def record_id(principal: str, route: str, key: str) -> str:
        return fingerprint(principal, route, key)

    def begin(
        self, record_id: str, request_hash: str, fresh_id: str, *, user_id: str | None = None
    ) -> Stored | Claim:
        """Claim the key for a request that creates ``fresh_id`` (or the id an earlier attempt
        of the same request was creating), or the stored answer of the same request.
        ``user_id``: whose resource it is; the user's erasure removes the record with them."""
        for _ in range(3):
            now = self._now()
            attempt = uuid.uuid4().hex
            fresh = self.records.claim(
                {
                    "_id": record_id,
                    "hash": request_hash,
                    "userId": user_id,
                    "state": "running",
                    "resourceId": fresh_id,
                    "createdAt": now,
                    "claimedAt": now,
                    "owner": self.owner,
                    "attempt": attempt,
                }
            )
            if fresh:
                return self._hold(record_id, attempt, fresh_id)
            doc = self.records.get(record_id)
            if doc is None:
                continue  # expired or released meanwhile: claim again
            created = doc.get("createdAt") or now
            if now - created > TTL:
                self.records.drop_expired(record_id, doc.get("createdAt"))
                continue
            if doc.get("hash") != request_hash:
                raise ApiProblem(
                    422,
                    "this Idempotency-Key was used with another request in the last 24 h: use "
                    "a new key for a new request",
                    slug="idempotency-key-reused",
                )
            state = doc.get("state")
            if state == "done":
                return Stored(int(doc["status"]), json.loads(doc["body"]))
            claimed = doc.get("claimedAt") or created
            with self._lock:
                running_here = record_id in self._running
            mine_and_over = doc.get("owner") == self.owner and not running_here
            # "failed": a cut as an earlier version recorded it.
            over = mine_and_over or state == "failed" or now - claimed > STALE_CLAIM
            if running_here or not over:
                raise ApiProblem(
                    409,
                    "a request with this Idempotency-Key is still in progress; retry shortly",
                    slug="idempotency-key-in-use",
                    headers={"Retry-After": "1"},
                )
            # Cut, or its process died, or ours and over: take it over, under the same id.
            taken = self.records.take_over(
                record_id,
                state,
                doc.get("claimedAt"),
                {"state": "running", "claimedAt": now, "owner": self.owner, "attempt": attempt},
            )
            if taken:
                return self._hold(record_id, attempt, str(doc.get("resourceId") or fresh_id))
        raise ApiProblem(409, "could not claim the Idempotency-Key; retry", slug="conflict")

    def _hold(self, record_id: str, attempt: str, resource_id: str) -> Claim:
        with self._lock:
            self._running[record_id] = attempt
        return Claim(resource_id)

    def _let_go(self, record_id: str) -> str | None:
        """This process's attempt on the record, no longer running."""
        with self._lock:
            return self._running.pop(record_id, None)

    def finish(self, record_id: str, status: int, body: Any) -> None:
        try:
            self.records.complete(
                record_id, {"state": "done", "status": status, "body": json.dumps(body)}
            )
        finally:
            self._let_go(record_id)

    def release(self, record_id: str) -> None:
        """A refusal: nothing was made, the key is free again."""
        attempt = self._let_go(record_id)
        self.records.release(record_id, attempt)

    def cut(self, record_id: str) -> None:
        """Cut off (an outage, a bug): part of the work may be done; the same request sent
        again takes the record over and finishes it under the same id. The claim is dated long
        ago (stale for any process, this code's or an earlier one's); if the outage refuses
        this write too, this process still knows the claim is its own and over."""
        attempt = self._let_go(record_id)
        self.records.cut(record_id, attempt, LONG_AGO)
