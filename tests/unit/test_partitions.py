"""Partitioning users: a stable, even hash; partitions as bucket ranges; shares of creators."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from shared.domain.plan import (
    BUCKETS,
    bucket_of,
    owned_partitions,
    partition_buckets,
    partition_of,
)


def test_the_bucket_of_a_user_is_stable_across_processes_and_versions() -> None:
    # Fixed values: a change of hash would move every user to another partition.
    assert [bucket_of(u) for u in ("u1", "alice", "user-0000001", "é")] == [
        bucket_of("u1"),
        bucket_of("alice"),
        bucket_of("user-0000001"),
        bucket_of("é"),
    ]
    assert bucket_of("u1") == 2773
    assert bucket_of("alice") == 2697
    assert all(0 <= bucket_of(f"x{i}") < BUCKETS for i in range(1000))


@pytest.mark.parametrize("prefix", ["u", "user-", "planu00", ""])
def test_sequential_ids_spread_evenly_over_16_partitions(prefix: str) -> None:
    n = 160_000
    counts = Counter(partition_of(bucket_of(f"{prefix}{i:07d}"), 16) for i in range(n))
    assert set(counts) == set(range(16))
    # Within 5% of the mean: five standard deviations of a fair split (about 1% here).
    assert max(counts.values()) < n / 16 * 1.05 and min(counts.values()) > n / 16 * 0.95


@pytest.mark.parametrize("partitions", [1, 2, 3, 7, 16, 100, 4096])
def test_partitions_are_contiguous_bucket_ranges_that_cover_every_bucket_once(
    partitions: int,
) -> None:
    ranges = [partition_buckets(p, partitions) for p in range(partitions)]
    assert ranges[0][0] == 0 and ranges[-1][1] == BUCKETS
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    sizes = {hi - lo for lo, hi in ranges}
    assert max(sizes) - min(sizes) <= 1
    for b in random.Random(partitions).sample(range(BUCKETS), 200):
        lo, hi = ranges[partition_of(b, partitions)]
        assert lo <= b < hi


def test_out_of_range_partitions_are_refused() -> None:
    for p, n in ((0, 0), (16, 16), (-1, 4), (0, BUCKETS + 1)):
        with pytest.raises(ValueError):
            partition_buckets(p, n)


@pytest.mark.parametrize("creators", [1, 2, 3, 4, 5, 16, 20])
def test_live_creators_split_the_partitions_evenly_and_each_exactly_once(creators: int) -> None:
    live = [f"c{i}" for i in range(creators)]
    shares = [owned_partitions(me, live, 16) for me in live]
    assert sorted(p for s in shares for p in s) == list(range(16))
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


def test_a_creator_not_yet_seen_counts_itself() -> None:
    assert owned_partitions("new", ["a", "b"], 6) == owned_partitions("new", ["a", "b", "new"], 6)
