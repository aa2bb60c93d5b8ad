"""The sender's token bucket, driven by a fake clock (no sleeping)."""

from __future__ import annotations

import pytest

from shared.expo.transport import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_burst_up_to_capacity_then_paced() -> None:
    clock = Clock()
    bucket = RateLimiter(600, 100, clock=clock, sleep=clock.sleep)
    assert bucket.acquire(100) == 0
    assert bucket.acquire(100) == pytest.approx(100 / 600)
    assert bucket.acquire(100) == pytest.approx(100 / 600)


def test_long_run_rate_is_exact() -> None:
    clock = Clock()
    bucket = RateLimiter(600, 100, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        bucket.acquire(100)
    # 10,000 notifications: the first 100 are free, the rest cost 1/600 s each.
    assert clock.now == pytest.approx(9900 / 600)


def test_reservations_queue_in_order_across_callers() -> None:
    clock = Clock()
    bucket = RateLimiter(600, 100, clock=clock, sleep=clock.sleep)
    waits = [bucket.reserve(100) for _ in range(4)]  # four threads asking at once
    assert waits == pytest.approx([0, 1 / 6, 2 / 6, 3 / 6])


def test_charge_above_capacity_goes_into_debt() -> None:
    clock = Clock()
    bucket = RateLimiter(50, 50, clock=clock, sleep=clock.sleep)
    assert bucket.acquire(100) == pytest.approx(1.0)


def test_idle_time_refills_only_to_capacity() -> None:
    clock = Clock()
    bucket = RateLimiter(600, 100, clock=clock, sleep=clock.sleep)
    bucket.acquire(100)
    clock.now += 60
    assert bucket.acquire(100) == 0
    assert bucket.acquire(1) > 0


def test_rejects_nonpositive() -> None:
    with pytest.raises(ValueError):
        RateLimiter(0, 100)
