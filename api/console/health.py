"""Broker, database and Expo health for the overview: ``tzpush doctor``'s own checks.

The checks are ``ops.doctor.run_checks`` as the command runs them (settings, the database with
its indexes, clock skew and bad documents, the broker with a real 1.5 s scheduled-delivery probe,
Expo and the token), so the console says exactly what ``tzpush doctor`` would say from the
API's host. They take a couple of seconds (the probe waits for its delivery), so one run at a
time is shared by whoever asks, and its answer is kept for ``FRESH_S``: a page reloaded every
few seconds does not put a probe on the broker each time.
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass

from ops import doctor
from shared.settings import Settings

FRESH_S = 30.0


@dataclass(frozen=True)
class HealthReport:
    checks: list[doctor.Check]
    at: dt.datetime
    took_s: float

    @property
    def failed(self) -> list[doctor.Check]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def warned(self) -> list[doctor.Check]:
        return [c for c in self.checks if c.status == "warn"]


class HealthCache:
    """The last doctor run, and a lock so that only one runs at a time."""

    def __init__(self, settings: Settings, fresh_s: float = FRESH_S) -> None:
        self.settings = settings
        self.fresh_s = fresh_s
        self._lock = threading.Lock()
        self._last: HealthReport | None = None

    def get(self, *, fresh: bool = False) -> HealthReport:
        """The last report if younger than ``fresh_s`` (and not ``fresh``), else a new run.
        Callers that arrive while a run is going wait for it and share it."""
        asked = dt.datetime.now(dt.UTC)
        with self._lock:
            last = self._last
            if last is not None and (last.at >= asked or not fresh):
                age = (asked - last.at).total_seconds()
                if last.at >= asked or age < self.fresh_s:
                    return last
            start = dt.datetime.now(dt.UTC)
            checks = doctor.run_checks(self.settings)
            end = dt.datetime.now(dt.UTC)
            self._last = HealthReport(checks, end, (end - start).total_seconds())
            return self._last
