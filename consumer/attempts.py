"""Attempt records: which messages may have left for Expo, written just before each request.

After a consumer dies, its journal says what was sent (tickets came back) and its attempt records
say what *may* have been sent (a request had started). A message in an attempt record with no
journaled outcome ends ``failed``, outcome unknown, never resent (no duplicate push); a message in
neither was certainly never sent, and whoever takes over sends it.

The record is written per request, so a crash leaves at most the requests in flight unknown, not
a whole due group. That is a database write in front of every request; to keep it off a herd's
critical path the writes are group-committed: whichever request thread finds no write running
writes every mark queued so far in one bulk write (one upserted document per due group, ids
pushed onto it), and the threads that queued behind it wait for that write, not for their own.
During a herd that is a handful of writes, not one per request.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database
from pymongo.errors import PyMongoError

from shared import db as dbm
from shared.clock import Clock
from shared.errors import TransientError

log = logging.getLogger(__name__)
Doc = dict[str, Any]


class AttemptLog:
    def __init__(self, database: Database[Doc], consumer: str, clock: Clock) -> None:
        self.db = database
        self.consumer = consumer
        self.clock = clock
        self._cv = threading.Condition()
        self._queued: list[tuple[str, list[str]]] = []
        self._seq = 0  # marks queued so far
        self._durable = 0  # marks written so far (or given up on)
        self._writing = False
        self.writes = 0  # bulk writes made (for tests and the bench)

    def mark(self, marker: str, ids: list[str]) -> None:
        """Return once ``ids`` are recorded under ``marker`` as possibly sent.

        A database error only logs: refusing to send would turn a blip into lost pushes, and
        without the record a crash in the next second ends these ``is_missed`` instead.
        """
        with self._cv:
            self._queued.append((marker, ids))
            self._seq += 1
            mine = self._seq
            while self._durable < mine:
                if self._writing:
                    self._cv.wait()
                    continue
                batch, upto = self._queued, self._seq
                self._queued = []
                self._writing = True
                self._cv.release()
                try:
                    self._write(batch, self.clock())
                finally:
                    self._cv.acquire()
                    self._writing = False
                    self._durable = upto
                    self._cv.notify_all()

    def _write(self, batch: list[tuple[str, list[str]]], now: dt.datetime) -> None:
        by_marker: dict[str, list[str]] = {}
        for marker, ids in batch:
            by_marker.setdefault(marker, []).extend(ids)
        ops = [
            UpdateOne(
                {"_id": marker},
                {
                    "$push": {"ids": {"$each": ids}},
                    "$setOnInsert": {"consumer": self.consumer, "at": now},
                },
                upsert=True,
            )
            for marker, ids in by_marker.items()
        ]
        try:
            with dbm.translate_errors("recording a send attempt"):
                self.db[dbm.ATTEMPTS].bulk_write(ops, ordered=False)
            self.writes += 1
        except (TransientError, PyMongoError) as exc:
            log.warning("could not record a send attempt (%s); sending anyway", exc)
