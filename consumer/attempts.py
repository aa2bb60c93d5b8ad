"""Attempt records: which messages may have left for Expo, written just before each request.

After a consumer dies, its journal says what was sent (tickets came back) and its attempt records
say what *may* have been sent (a request had started). A message in an attempt record with no
journaled outcome ends ``failed``, outcome unknown, never resent (no duplicate push); a message in
neither was certainly never sent, and whoever takes over sends it.

The record is written per request, so a crash leaves at most the requests in flight unknown, not
a whole due group. That is a database write in front of every request; to keep it off a herd's
critical path the writes are group-committed: whichever request thread finds no write running
writes every mark queued so far as ONE inserted document, and the threads that queued behind it
wait for that write, not for their own. During a herd that is a few dozen plain inserts, not one
write per request (an upsert pushing onto a growing array cost the database twice as much).

A record is deleted once every due group it holds ids of has its outcomes journaled
(``release``); the recorder deletes them in bulk when nothing is being sent. Whatever a crash
leaves behind expires with the TTL index.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid

from shared.clock import Clock
from shared.errors import TransientError
from shared.store import db as dbm
from shared.store.guards import Fenced
from shared.store.mongo import StoreError, Stores, stores_of

log = logging.getLogger(__name__)


class AttemptLog:
    def __init__(self, stores: Stores, consumer: str, clock: Clock) -> None:
        self.guards = stores_of(stores).guards
        self.consumer = consumer
        self.clock = clock
        self._cv = threading.Condition()
        self._queued: list[tuple[str, list[str]]] = []
        self._seq = 0  # marks queued so far
        self._durable = 0  # marks written so far (or given up on)
        self._writing = False
        self.writes = 0  # records written (for tests and the bench)
        self._docs_of: dict[str, set[str]] = {}  # due group (marker) -> records holding its ids
        self._open: dict[str, set[str]] = {}  # record -> due groups not yet released
        self._fenced_by: str | None = None  # the consumer that took over from this one

    def mark(self, marker: str, ids: list[str]) -> None:
        """Return once ``ids`` are recorded under ``marker`` as possibly sent.

        A database error only logs: refusing to send would turn a blip into lost pushes, and
        without the record a crash in the next second ends these ``is_missed`` instead.

        Raises ``Fenced`` when a takeover has fenced this consumer: checked after the record is
        written, in the same group commit, so a takeover either sees the record or this
        consumer sees the fence (shared/store/guards.py). Once fenced, every mark raises.
        """
        with self._cv:
            self._queued.append((marker, ids))
            self._seq += 1
            mine = self._seq
            while self._durable < mine and self._fenced_by is None:
                if self._writing:
                    self._cv.wait()
                    continue
                batch, upto = self._queued, self._seq
                self._queued = []
                self._writing = True
                self._cv.release()
                written = None
                try:
                    written = self._write(batch, self.clock())
                    if written is not None:
                        self._fenced_by = self._check_fence()
                finally:
                    self._cv.acquire()
                    self._writing = False
                    self._durable = upto
                    if written is not None:
                        for m, _ in batch:
                            self._docs_of.setdefault(m, set()).add(written)
                            self._open.setdefault(written, set()).add(m)
                    self._cv.notify_all()
            if self._fenced_by is not None:
                raise Fenced(f"{self.consumer} was fenced by {self._fenced_by} (a takeover)")

    def release(self, marker: str) -> list[str]:
        """Due group ``marker`` has every outcome journaled: the records now free to delete."""
        free: list[str] = []
        with self._cv:
            for rec in self._docs_of.pop(marker, set()):
                groups = self._open.get(rec, set())
                groups.discard(marker)
                if not groups:
                    self._open.pop(rec, None)
                    free.append(rec)
        return free

    def _check_fence(self) -> str | None:
        try:
            with dbm.translate_errors("checking this consumer's fence"):
                return self.guards.fenced_by(self.consumer)
        except (TransientError, StoreError) as exc:
            log.warning("could not check the fence (%s); sending anyway", exc)
            return None

    def _write(self, batch: list[tuple[str, list[str]]], now: dt.datetime) -> str | None:
        rec = f"{self.consumer}:{uuid.uuid4().hex[:16]}"
        ids = [i for _, ids in batch for i in ids]
        try:
            with dbm.translate_errors("recording a send attempt"):
                self.guards.record_attempt(rec, self.consumer, now, ids)
            self.writes += 1
            return rec
        except (TransientError, StoreError) as exc:
            log.warning("could not record a send attempt (%s); sending anyway", exc)
            return None
