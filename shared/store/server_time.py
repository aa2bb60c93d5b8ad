"""The database server's time, as every process of a deployment agrees on it.

A process's own clock may run seconds ahead or behind; the database server's is the one all of
them share. ``ServerTime`` is this host's clock corrected by its distance from the server's,
read again every ``read_every`` (a round trip, on the caller's thread); while the server cannot
be read, the last distance known (none: this host's clock).
"""

from __future__ import annotations

import datetime as dt
import threading

from pymongo.database import Database
from pymongo.errors import PyMongoError

from shared.clock import Clock, utcnow
from shared.domain.messages import Doc
from shared.errors import TzpushError
from shared.store import db as dbm

READ_EVERY = dt.timedelta(minutes=5)


class ServerTime:
    """A clock (call it for "now") that reads the database server's time through this host's."""

    def __init__(
        self, database: Database[Doc], local: Clock = utcnow, read_every: dt.timedelta = READ_EVERY
    ) -> None:
        self.database = database
        self.local = local
        self.read_every = read_every
        self._lock = threading.Lock()
        self._skew: tuple[dt.datetime, dt.timedelta] | None = None  # read at, this host ahead by

    def __call__(self) -> dt.datetime:
        local = self.local()
        with self._lock:
            known = self._skew
        if known is None or not dt.timedelta(0) <= local - known[0] <= self.read_every:
            try:
                read = dbm.server_clock(self.database, self.local)
            except (TzpushError, PyMongoError):
                read = None
            if read is not None:
                known = (local, dt.timedelta(seconds=read.skew_s))
            else:
                known = (local, known[1] if known is not None else dt.timedelta(0))
            with self._lock:
                self._skew = known
        return local - known[1]
