"""``Idempotency-Key`` for POSTs that create: the same key and body within 24 h answer the same.

A record per (API key name, route, Idempotency-Key) in ``api_idempotency``: inserted before the
work (its ``_id`` is the claim, so two concurrent requests with one key cannot both run), and
completed with the answer. Then:
- the same key and the same body (a retry): the stored answer, with ``Idempotent-Replayed: true``;
- the same key and another body: 422, the key was used for something else;
- the same key while the first request still runs: 409, try again shortly.
Only successful answers are kept: a refused request leaves no record, so it can be corrected
and sent again under the same key. Records expire after 24 h (checked on read, and removed by a
TTL index); a claim older than ``STALE_CLAIM`` (a process that died mid-request) is taken over.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pymongo import ASCENDING, IndexModel
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from api.problems import ApiProblem, field_error, invalid
from shared.clock import Clock, utcnow
from shared.domain.messages import Doc

COLLECTION = "api_idempotency"
TTL = dt.timedelta(hours=24)
STALE_CLAIM = dt.timedelta(seconds=60)
MAX_KEY_LENGTH = 255
INDEXES = [
    IndexModel([("createdAt", ASCENDING)], name="idempotency_expire", expireAfterSeconds=86400)
]


@dataclass(frozen=True)
class Stored:
    status: int
    body: Any


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
    def __init__(self, database: Database[Doc], clock: Clock = utcnow) -> None:
        self.coll = database[COLLECTION]
        self.clock = clock

    @staticmethod
    def record_id(principal: str, route: str, key: str) -> str:
        return fingerprint(principal, route, key)

    def begin(self, record_id: str, request_hash: str) -> Stored | None:
        """Claim the key (None: go ahead), or the stored answer of the same request."""
        for _ in range(3):
            now = self.clock()
            try:
                self.coll.insert_one(
                    {"_id": record_id, "hash": request_hash, "state": "running", "createdAt": now}
                )
                return None
            except DuplicateKeyError:
                pass
            doc = self.coll.find_one({"_id": record_id})
            if doc is None:
                continue  # expired or released meanwhile: claim again
            created = doc.get("createdAt") or now
            running = doc.get("state") == "running"
            if now - created > TTL or (running and now - created > STALE_CLAIM):
                self.coll.delete_one({"_id": record_id, "createdAt": doc.get("createdAt")})
                continue
            if doc.get("hash") != request_hash:
                raise ApiProblem(
                    422,
                    "this Idempotency-Key was used with another request in the last 24 h: use "
                    "a new key for a new request",
                    slug="idempotency-key-reused",
                )
            if running:
                raise ApiProblem(
                    409,
                    "a request with this Idempotency-Key is still in progress; retry shortly",
                    slug="idempotency-key-in-use",
                    headers={"Retry-After": "1"},
                )
            return Stored(int(doc["status"]), json.loads(doc["body"]))
        raise ApiProblem(409, "could not claim the Idempotency-Key; retry", slug="conflict")

    def finish(self, record_id: str, status: int, body: Any) -> None:
        self.coll.update_one(
            {"_id": record_id},
            {"$set": {"state": "done", "status": status, "body": json.dumps(body)}},
        )

    def release(self, record_id: str) -> None:
        self.coll.delete_one({"_id": record_id, "state": "running"})
