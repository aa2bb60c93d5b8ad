"""Stopping on time: SIGTERM starts a graceful stop, and a deadline ends the process regardless.

A service asked to stop (ECS sends SIGTERM, then SIGKILL after its stop timeout) first finishes
what it can: a consumer sends what is due within ``shutdown.timeout_s`` and releases the guards
of what certainly never left. Whatever is down (database, broker, Expo), the process exits by
``shutdown.timeout_s`` + a small margin: past it, a watchdog ends the process at once. That is
safe by construction: what a consumer could not release stays guarded, and a takeover decides
it from the journal and the attempt records, as after a crash.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# Seconds past the service's own shutdown budget before the watchdog ends the process: room for
# the interpreter's exit, well inside the 2 s the issue allows.
MARGIN_S = 1.0
EXIT_LATE = 75  # EX_TEMPFAIL: stopped by the deadline, not by the graceful path


def stop_on_signals(stop: Callable[[], None], deadline_s: float) -> None:
    """On SIGTERM/SIGINT call ``stop()`` once, and end the process ``deadline_s`` + ``MARGIN_S``
    later if it is still running. Call from the main thread of an entry point."""
    fired = threading.Event()

    def handler(signum: int, _: Any) -> None:
        if fired.is_set():
            return
        fired.set()
        started = time.monotonic()
        threading.Thread(
            target=_watchdog,
            args=(started, deadline_s + MARGIN_S),
            name="stop-deadline",
            daemon=True,
        ).start()
        stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _watchdog(started: float, budget_s: float) -> None:
    time.sleep(max(0.0, budget_s - (time.monotonic() - started)))
    log.error(
        "still stopping %.1f s after the signal: exiting now (what was not released is left "
        "for a takeover)",
        budget_s,
    )
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_LATE)
