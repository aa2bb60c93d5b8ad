"""The registry of live senders, and each one's share of Expo's rate.

Every process that sends to Expo (each consumer, each ``tzpush replay``) keeps a document in
``expo_senders`` fresh (a heartbeat every ``PERIOD_S``) and sends at ``fleet_rate / N``, N being
the senders whose heartbeat is younger than ``LIVE_S``. So the fleet as a whole stays within
Expo's 600/s however many consumers run: 4 in steady state, 8 during a deploy, more with
``compose --scale`` or a replay beside them. A sender that joins reads the registry before its
first request and, when others are live, waits one period so that they have seen it before it
sends: a sender joining never adds its share on top of theirs. One that leaves lowers the total
until the others see it. When the database cannot be read the last known share is kept.

The same documents tell ``tzpush stats`` and ``/healthz`` which categories have a live consumer.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
from collections.abc import Iterable

from pymongo.database import Database
from pymongo.errors import PyMongoError

from shared.clock import Clock, utcnow
from shared.domain.messages import Doc
from shared.store.abc import SenderRegistry
from shared.store.mongo.fleet import MongoSenders

log = logging.getLogger(__name__)

PERIOD_S = 0.5
LIVE_S = 3.0


Registry = SenderRegistry | Database[Doc]
"""The registry, or a MongoDB database (its adapter is made for it)."""


def registry_of(where: Registry) -> SenderRegistry:
    return MongoSenders(where) if isinstance(where, Database) else where


def live_senders(database: Registry, now: dt.datetime) -> list[Doc]:
    """Senders whose heartbeat is younger than ``LIVE_S``."""
    return registry_of(database).live_since(now - dt.timedelta(seconds=LIVE_S))


def live_consumers(
    database: Registry, categories: Iterable[str], now: dt.datetime | None = None
) -> dict[str, int]:
    """How many live consumers take each of ``categories`` (0 for one nobody takes)."""
    counts = dict.fromkeys(categories, 0)
    for s in live_senders(database, now or utcnow()):
        if s.get("kind") == "consumer":
            for c in set(s.get("categories") or []) & counts.keys():
                counts[c] += 1
    return counts


def categories_without_consumer(
    database: Registry, categories: Iterable[str], now: dt.datetime
) -> list[str]:
    """The configured categories that no live consumer takes."""
    return [c for c, n in live_consumers(database, categories, now).items() if n == 0]


class FleetShare:
    """This process's place in the registry and its share of ``fleet_rate``.

    ``rate()`` is what a sender's limiter asks before each request; ``start()`` registers (and
    reads the registry once, so the first request already goes at the shared rate) and starts
    the heartbeat; ``stop()`` leaves the registry.
    """

    def __init__(
        self,
        database: Registry,
        sender_id: str,
        fleet_rate: float,
        *,
        kind: str = "consumer",
        categories: Iterable[str] = (),
        clock: Clock = utcnow,
    ) -> None:
        self.registry, self.clock = registry_of(database), clock
        self.sender_id, self.kind, self.categories = sender_id, kind, sorted(categories)
        self.fleet_rate = fleet_rate
        self.senders = 1  # live senders, this one included, as last read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def rate(self) -> float:
        return self.fleet_rate / max(1, self.senders)

    def start(self) -> FleetShare:
        """Register, read the registry, and start the heartbeat. When others are already
        sending, wait until they have seen this one (one period) before the first request:
        joining then never adds this sender's share on top of theirs, even for a moment."""
        self._beat()
        if self.senders > 1:
            self._stop.wait(PERIOD_S + 0.1)
            self._beat()
        self._thread = threading.Thread(target=self._loop, name="fleet", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(PERIOD_S * 4)
        try:
            self.registry.leave(self.sender_id)
        except PyMongoError as exc:
            log.warning("could not leave the sender registry (%s); it expires by itself", exc)

    def _loop(self) -> None:
        while not self._stop.wait(PERIOD_S):
            self._beat()

    def _beat(self) -> None:
        now = self.clock()
        try:
            self.registry.beat(
                self.sender_id,
                now,
                {"kind": self.kind, "categories": self.categories},
                {"startedAt": now, "host": socket.gethostname(), "pid": os.getpid()},
            )
            n = len(live_senders(self.registry, now))
        except PyMongoError as exc:
            log.warning(
                "sender registry unreadable (%s); keeping a share of 1/%d", exc, self.senders
            )
            return
        if n != self.senders:
            log.info("%d live senders: sending at %.0f/s", n, self.fleet_rate / max(1, n))
        self.senders = max(1, n)


def consumer_alerts(database: Registry, categories: Iterable[str]) -> dict[str, str]:
    """``/healthz`` alerts: ``{"consumers": "no consumer alive for category X, Y"}``, or ``{}``."""
    missing = categories_without_consumer(database, categories, utcnow())
    if not missing:
        return {}
    return {"consumers": "no consumer alive for category " + ", ".join(missing)}
