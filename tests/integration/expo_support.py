"""Helpers for tests of the Expo sender against the fake (the ``make_fake`` and ``make_sender``
fixtures are in conftest.py): the factory type and an ``on_event`` hook that counts."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from devstack.fake_expo import FakeExpo

MakeFake = Callable[..., FakeExpo]
SENDER_TUNING = ("backoff_base_s", "backoff_cap_s", "throttle_window_s")


class Events:
    """An on_event hook that counts."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, name: str, fields: dict[str, Any]) -> None:
        with self.lock:
            self.counts[name] += 1
