"""Time as a collaborator: services take a ``Clock`` so tests and benchmarks can drive it.

A ``Clock`` answers "what instant is it" (aware, UTC); every due instant, grace window and cache
age in a service is measured with it. ``FakeClock`` is one a test moves by hand. ``Budget`` is
the other kind of time: real seconds that bound a wait on threads or sockets (a shutdown budget,
a burst's idle spell), which no fake clock may stretch.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable

Clock = Callable[[], dt.datetime]


def utcnow() -> dt.datetime:
    """The current instant, aware, UTC."""
    return dt.datetime.now(dt.UTC)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def ms_of(clock: Clock) -> int:
    """The clock's instant in milliseconds since the epoch."""
    return int(clock().timestamp() * 1000)


def instant_ms(ms: int) -> dt.datetime:
    """The aware UTC instant of ``ms`` milliseconds since the epoch."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


class FakeClock:
    """A clock that stands still until a test moves it (``advance``, ``set``); thread-safe."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._now = start or dt.datetime(2026, 1, 5, 8, 0, tzinfo=dt.UTC)
        self._lock = threading.Lock()

    def __call__(self) -> dt.datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> dt.datetime:
        """Move the clock ``seconds`` forward; return the new instant."""
        with self._lock:
            self._now += dt.timedelta(seconds=seconds)
            return self._now

    def set(self, instant: dt.datetime) -> None:
        with self._lock:
            self._now = instant


def elapsed_s() -> float:
    """Seconds on a monotonic clock, for measuring real waits (never a due instant)."""
    return time.monotonic()


class Budget:
    """Real seconds left of a wait's budget (monotonic: immune to clock steps and fake clocks)."""

    def __init__(self, seconds: float) -> None:
        self._end = elapsed_s() + seconds

    def left(self) -> float:
        """Seconds left, never below zero."""
        return max(0.0, self._end - elapsed_s())

    def spent(self) -> bool:
        return self.left() <= 0.0
