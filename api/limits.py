"""A request rate limit per API key: a token bucket per key name, answered 429 when empty.

Each key may make ``rate`` requests a second on average, and up to ``burst`` at once after a
quiet spell. A request over the limit is refused before its route runs, with
``/problems/too-many-requests`` and ``Retry-After`` (whole seconds until one request is allowed
again). Unauthenticated probes (``/healthz``, ``/readyz``, the docs) are not counted. The buckets
live in the process: N API tasks allow N times the rate in all. The rate and burst are settings
(``TZPUSH_API__RATE_PER_SECOND``, ``TZPUSH_API__BURST``); the defaults below are theirs.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

RATE_PER_S = 200.0
BURST = 400.0


class RateLimiter:
    def __init__(
        self,
        rate: float = RATE_PER_S,
        burst: float = BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # name -> (tokens, at)

    def take(self, name: str) -> float:
        """0 when ``name`` may make a request now (and count it), else seconds to wait."""
        with self._lock:
            now = self._clock()
            tokens, at = self._buckets.get(name, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens >= 1:
                self._buckets[name] = (tokens - 1, now)
                return 0.0
            self._buckets[name] = (tokens, now)
            return (1 - tokens) / self.rate

    @staticmethod
    def retry_after(wait: float) -> str:
        """``Retry-After`` in whole seconds, at least 1."""
        return str(max(1, math.ceil(wait)))
