"""compute_backoff: a pure function, tested with a seeded RNG."""

from __future__ import annotations

import random

import pytest

from shared.domain.backoff import compute_backoff


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [(1, 0.25, 0.5), (2, 0.5, 1.0), (3, 1.0, 2.0), (4, 2.0, 4.0), (5, 4.0, 8.0)],
)
def test_doubles_per_attempt_with_half_guaranteed(attempt: int, low: float, high: float) -> None:
    rng = random.Random(1)
    for _ in range(200):
        assert low <= compute_backoff(attempt, 0.5, 60.0, rng) <= high


def test_capped() -> None:
    rng = random.Random(2)
    delays = [compute_backoff(a, 0.5, 3.0, rng) for a in range(6, 200)]
    assert all(1.5 <= d <= 3.0 for d in delays)


def test_huge_attempt_does_not_overflow() -> None:
    assert compute_backoff(10_000, 1.0, 5.0, random.Random(3)) <= 5.0


def test_jitter_spreads_clients() -> None:
    rng = random.Random(4)
    delays = {round(compute_backoff(3, 1.0, 60.0, rng), 6) for _ in range(50)}
    assert len(delays) > 40


def test_same_seed_same_delays() -> None:
    a = [compute_backoff(n, 0.2, 10, random.Random(9)) for n in range(1, 8)]
    b = [compute_backoff(n, 0.2, 10, random.Random(9)) for n in range(1, 8)]
    assert a == b


@pytest.mark.parametrize("attempt", [0, -1])
def test_attempt_starts_at_one(attempt: int) -> None:
    with pytest.raises(ValueError):
        compute_backoff(attempt, 1.0, 2.0, random.Random())
