"""A tiny timer wheel: run callables at instants of the consumer's clock, from one thread.

Holding hundreds of batches until their due instants with one thread each would work, but one
heap and one thread is simpler to stop, and ``cancel_all`` makes a clean shutdown possible.
With ``thread=False`` nothing runs by itself: a test moves its fake clock and calls ``run_due``.
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
import threading
from collections.abc import Callable

from shared.clock import Clock


class Timers:
    def __init__(self, clock: Clock, name: str = "timers", *, thread: bool = True) -> None:
        self._clock = clock
        self._heap: list[tuple[dt.datetime, int, Callable[[], object]]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None
        if thread:
            self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
            self._thread.start()

    def at(self, when: dt.datetime, fn: Callable[[], object]) -> None:
        """Run ``fn`` once the clock reads ``when`` (at once if that has passed)."""
        with self._cv:
            heapq.heappush(self._heap, (when, next(self._seq), fn))
            self._cv.notify()

    def next_at(self) -> dt.datetime | None:
        """The instant of the earliest callable waiting, or ``None``."""
        with self._cv:
            return self._heap[0][0] if self._heap else None

    def run_due(self) -> int:
        """Run, in the calling thread and in order, every callable whose instant has come;
        return how many ran (a callable that arms another already due runs it too)."""
        n = 0
        while (fn := self._pop_due()) is not None:
            fn()
            n += 1
        return n

    def cancel_all(self) -> list[Callable[[], object]]:
        """Drop every pending callable and return them (so the caller can release their work)."""
        with self._cv:
            out = [fn for _, _, fn in self._heap]
            self._heap.clear()
            return out

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _pop_due(self) -> Callable[[], object] | None:
        with self._cv:
            if self._heap and self._heap[0][0] <= self._clock():
                return heapq.heappop(self._heap)[2]
            return None

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stopped and (not self._heap or self._heap[0][0] > self._clock()):
                    wait = (
                        (self._heap[0][0] - self._clock()).total_seconds() if self._heap else None
                    )
                    self._cv.wait(wait)
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(self._heap)
            fn()
