"""Helpers of a streamed planning pass, pure or thread-only: bucket ranges, chunks, read-ahead."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def merged(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open bucket ranges, sorted, adjacent ones joined (partitions 0..7 of 16 are one)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def chunks(
    ranges: Iterable[tuple[int, int]], per_bucket: float, target: int, buckets: int
) -> Iterator[tuple[int, int]]:
    """Each range cut into consecutive ranges of about ``target`` reminders (``per_bucket``
    reminders in each bucket; all ``buckets`` at once when there are none)."""
    step = buckets if per_bucket <= 0 else max(1, int(target / per_bucket))
    for lo, hi in ranges:
        for a in range(lo, hi, step):
            yield a, min(a + step, hi)


def ahead(items: Iterator[T], depth: int) -> Iterator[T]:
    """``items``, produced by a thread of their own up to ``depth`` ahead of the consumer.

    The producer's exception is raised in the consumer; a consumer that stops early (an
    exception, a ``break``) stops the producer at its next item, and the thread is joined."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth} (0 would be unbounded)")
    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(entry, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(("item", item)):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            put(("error", exc))
            return
        put(("end", None))

    thread = threading.Thread(target=produce, name="plan-read", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()
