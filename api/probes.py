"""Readiness without the work pool: the database is pinged on a thread of its own.

The routes' work runs in a shared pool of worker threads; when every one of them waits (a slow
or paused database, a saturating load), a probe queued behind them answers late, and a load
balancer's health check (5 s) marks a healthy task unhealthy. ``/healthz`` needs no thread at
all; ``/readyz`` asks ``DatabaseProbe``, which pings from its own thread, one ping at a time
(a ping still running is awaited again, never doubled), and answers within ``timeout_s``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

READY_TIMEOUT_S = 2.0


class DatabaseProbe:
    """Pings the database behind ``client()`` off the work pool, within ``timeout_s``."""

    def __init__(self, client: Callable[[], Any], timeout_s: float = READY_TIMEOUT_S) -> None:
        self._client = client
        self.timeout_s = timeout_s
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="readyz")
        self._lock = threading.Lock()
        self._ping: concurrent.futures.Future[Any] | None = None

    async def problem(self) -> str | None:
        """None when the database answered a ping within the timeout, else what went wrong."""
        with self._lock:
            if self._ping is None or self._ping.done():
                self._ping = self._pool.submit(self._client().admin.command, "ping")
            ping = self._ping
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(ping)), self.timeout_s)
        except TimeoutError:
            return f"unreachable: no answer within {self.timeout_s:g} s"
        except Exception as exc:  # any failure to ping means not ready; said, not raised
            return f"unreachable: {type(exc).__name__}"
        return None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
