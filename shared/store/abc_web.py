"""The storage seam, the HTTP API's own records: Idempotency-Key records and console sessions.

``shared.store.mongo.web`` implements these on MongoDB and ``shared.store.memory.web`` in
memory, with the same semantics (an ``_id`` taken refuses a second claim, compare-and-set on
the fields named); ``tests/contract/test_web_stores.py`` runs one suite over both. The rules
are the API's: ``api.idempotency`` (when a claim is stale, what a retry gets back) and
``api.console.session`` (what makes a session valid).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from shared.clock import Clock
from shared.domain.messages import Doc


class IdempotencyRecords(Protocol):
    """One record per (API key, route, Idempotency-Key), by ``_id``."""

    def clock(self, local: Clock, read_every: dt.timedelta) -> Clock:
        """A clock on which every API process agrees, from this host's ``local`` one: the
        database server's time (read again every ``read_every``), or ``local`` itself where
        there is one process (the memory twin)."""

    def claim(self, record: Doc) -> bool:
        """Insert ``record``; ``False`` (and nothing written) if a record with its ``_id``
        exists."""

    def get(self, record_id: str) -> Doc | None: ...

    def drop_expired(self, record_id: str, created_at: Any) -> None:
        """Delete the record if its ``createdAt`` is still ``created_at`` (a record claimed
        again meanwhile stays)."""

    def take_over(
        self, record_id: str, state: Any, claimed_at: Any, fields: Mapping[str, Any]
    ) -> bool:
        """Set ``fields`` if the record's ``state`` and ``claimedAt`` are still these (a
        compare-and-set: of two processes taking one record over, one wins); whether it did."""

    def complete(self, record_id: str, fields: Mapping[str, Any]) -> None:
        """Set ``fields`` on the record, whatever it holds."""

    def release(self, record_id: str, attempt: str | None) -> None:
        """Delete the record if it is still ``running`` under ``attempt``."""

    def cut(self, record_id: str, attempt: str | None, claimed_at: dt.datetime) -> None:
        """Set ``claimedAt`` if the record is still ``running`` under ``attempt``."""

    def ensure_expiry(self) -> None:
        """Make records go 24 h after their ``createdAt`` (idempotent; a TTL index on MongoDB;
        the API checks ``createdAt`` on read anyway)."""


class SessionRecords(Protocol):
    """Console sessions by ``_id`` (the digest of the cookie's id)."""

    def add(self, session: Doc) -> None:
        """Insert a new session (its ``_id`` is random: never taken)."""

    def get(self, session_id: str) -> Doc | None: ...

    def delete(self, session_id: str) -> None:
        """Delete the session (no error if there is none)."""

    def ensure_expiry(self) -> None:
        """Make sessions go once their ``expiresAt`` is past (idempotent; a TTL index on
        MongoDB; the console checks ``expiresAt`` at each read anyway)."""


@dataclass(frozen=True)
class WebStores:
    """What the HTTP API keeps of its own: Idempotency-Key records, console sessions."""

    idempotency: IdempotencyRecords
    sessions: SessionRecords

    def ensure_expiry(self) -> None:
        """Both kinds of record expire (``ensure_expiry`` of each)."""
        self.idempotency.ensure_expiry()
        self.sessions.ensure_expiry()
