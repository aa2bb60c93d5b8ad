"""Exponential back-off with jitter: one pure function, shared by every adapter that retries."""

from __future__ import annotations

import random


def compute_backoff(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Seconds to wait before retry number ``attempt`` (1 = first retry).

    "Equal jitter": the ceiling ``min(cap, base * 2**(attempt-1))`` doubles per attempt, and the
    delay is drawn from [ceiling/2, ceiling]. Half of it is guaranteed, so a storm of clients
    really does slow down (full jitter may draw ~0), and the other half is random, so clients
    that failed together do not retry in lock-step.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, not {attempt}")
    if base < 0 or cap < 0:
        raise ValueError("base and cap must be >= 0")
    # Cap the exponent too: 2**attempt for a huge attempt would be a huge float for nothing.
    ceiling = min(cap, base * 2.0 ** min(attempt - 1, 62))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)
