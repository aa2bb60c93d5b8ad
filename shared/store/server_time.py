"""The database server's time, as every process of a deployment agrees on it.

A process's own clock may run seconds ahead or behind; the database server's is the one all of
them share. ``ServerTime`` is this host's clock corrected by its distance from the server's,
read again every ``read_every`` (a round trip, on the caller's thread). The distance taken is
the most this host can be ahead (``ServerClock.ahead_at_most_s``), so a slow read makes "now"
late, never early. While the server cannot be read, the last distance known (none yet: this
host's clock), and the read is tried again ``retry`` later, not a whole period later.
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
RETRY = dt.timedelta(seconds=1)


class ServerTime:
    """A clock (call it for "now") that reads the database server's time through this host's."""

    def __init__(
        self,
        database: Database[Doc],
        local: Clock = utcnow,
        read_every: dt.timedelta = READ_EVERY,
        retry: dt.timedelta = RETRY,
    ) -> None:
        self.database = database
        self.local = local
        self.read_every = read_every
        self.retry = retry
        self._lock = threading.Lock()
        # When to read next (this host's clock), and how far ahead of the server it is.
        self._skew: tuple[dt.datetime, dt.timedelta] | None = None

    def __call__(self) -> dt.datetime:
        local = self.local()
        with self._lock:
            known = self._skew
        due = known is None or not local < known[0] <= local + self.read_every
        if due:
            try:
                read = dbm.server_clock(self.database, self.local)
            except (TzpushError, PyMongoError):
                read = None
            after = self.local()
            if read is not None:
                known = (after + self.read_every, dt.timedelta(seconds=read.ahead_at_most_s))
            else:
                known = (after + self.retry, known[1] if known is not None else dt.timedelta(0))
            with self._lock:
                self._skew = known
            local = after
        assert known is not None
        return local - known[1]
