"""A tiny timer wheel: run callables at monotonic instants from one thread.

Holding hundreds of batches until their due instants with one thread each would work, but one
heap and one thread is simpler to stop, and ``cancel_all`` makes a clean shutdown possible.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable


class Timers:
    def __init__(self, name: str = "timers") -> None:
        self._heap: list[tuple[float, int, Callable[[], object]]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def at(self, when: float, fn: Callable[[], object]) -> None:
        """Run ``fn`` at ``time.monotonic() == when`` (at once if that has passed)."""
        with self._cv:
            heapq.heappush(self._heap, (when, next(self._seq), fn))
            self._cv.notify()

    def next_at(self) -> float | None:
        with self._cv:
            return self._heap[0][0] if self._heap else None

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
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cv.wait(timeout)
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(self._heap)
            fn()
