"""Time as a collaborator: services take a ``Clock`` so tests and benchmarks can drive it."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

Clock = Callable[[], dt.datetime]


def utcnow() -> dt.datetime:
    """The current instant, aware, UTC."""
    return dt.datetime.now(dt.UTC)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
