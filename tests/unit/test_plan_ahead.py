"""The planner's read-ahead (creator.stream.ahead): order, errors, early stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from creator.stream import ahead


def test_items_come_in_order_and_the_producer_runs_ahead_at_most_depth() -> None:
    made: list[int] = []

    def items() -> Iterator[int]:
        for i in range(10):
            made.append(i)
            yield i

    got = []
    for x in ahead(items(), 2):
        time.sleep(0.02)
        # made: what was taken (x + 1), up to 2 queued, one held by the blocked producer
        assert len(made) <= x + 1 + 2 + 1
        got.append(x)
    assert got == list(range(10))


def test_the_producers_exception_is_raised_in_the_consumer() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise ValueError("bad chunk")

    with pytest.raises(ValueError, match="bad chunk"):
        list(ahead(items(), 3))


def test_a_consumer_that_stops_early_stops_the_producer() -> None:
    def items() -> Iterator[int]:
        i = 0
        while True:
            yield i
            i += 1

    before = threading.active_count()
    for x in ahead(items(), 2):
        if x == 3:
            break
    assert threading.active_count() == before  # joined, not left running


def test_a_depth_below_one_is_refused_not_unbounded() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        next(ahead(iter([1, 2]), 0))
