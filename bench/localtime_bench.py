"""Benchmark: resolve ``next_occurrence`` for many reminders spread over time zones.

    python -m bench.localtime_bench [--n 100000] [--seed 1] [--out FILE]

Reminders are seeded-random: half from a realistic list of user zones, half from every zone in
the tz database, random HH:MM, offsets of 0 or up to ±90 minutes, a quarter with weekday filters.
Each of 5 runs first clears the module's caches (cold) and then repeats the same work (warm);
the figures are medians. ``run()`` returns the same dict for the project's main benchmark.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import time
import zoneinfo
from typing import Any

from shared import localtime

REALISTIC_ZONES = [
    "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles",
    "America/Sao_Paulo", "America/Mexico_City", "America/Santiago", "America/Toronto",
    "America/St_Johns", "Europe/London", "Europe/Berlin", "Europe/Paris", "Europe/Madrid",
    "Europe/Moscow", "Europe/Istanbul", "Africa/Lagos", "Africa/Cairo", "Africa/Johannesburg",
    "Asia/Kolkata", "Asia/Kathmandu", "Asia/Tashkent", "Asia/Dubai", "Asia/Tehran",
    "Asia/Shanghai", "Asia/Tokyo", "Asia/Singapore", "Asia/Jakarta", "Australia/Sydney",
    "Australia/Adelaide", "Australia/Lord_Howe", "Pacific/Auckland", "Pacific/Chatham",
    "Pacific/Apia", "UTC",
]  # fmt: skip
RUNS = 5
NOW = dt.datetime(2026, 3, 28, 23, 17, 42, tzinfo=dt.UTC)  # a weekend with European DST


def _reminders(n: int, seed: int) -> list[tuple[dt.time, str, dt.datetime, int, Any]]:
    rng = random.Random(seed)
    all_zones = sorted(zoneinfo.available_timezones() - {"localtime"})
    out = []
    for _ in range(n):
        tz = rng.choice(REALISTIC_ZONES if rng.random() < 0.5 else all_zones)
        t = dt.time(rng.randrange(24), rng.randrange(60))
        after = NOW + dt.timedelta(seconds=rng.randrange(7 * 86_400))
        offset = 0 if rng.random() < 0.7 else rng.randint(-90, 90)
        weekdays = None if rng.random() < 0.75 else sorted(rng.sample(range(7), rng.randint(1, 5)))
        out.append((t, tz, after, offset, weekdays))
    return out


def _clear_caches() -> None:
    for fn in (
        localtime._load_zone,
        localtime._day_offsets,
        localtime._resolve_on_transition_day,
        localtime._steady_offset,
    ):
        fn.cache_clear()


def _once(reminders: list[tuple[dt.time, str, dt.datetime, int, Any]]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) for one pass; CPU time is steadier on a shared machine."""
    next_occurrence = localtime.next_occurrence
    t0, c0 = time.perf_counter(), time.process_time()
    for t, tz, after, offset, weekdays in reminders:
        next_occurrence(t, tz, after, offset_minutes=offset, weekdays=weekdays)
    return time.perf_counter() - t0, time.process_time() - c0


def run(n: int = 100_000, seed: int = 1) -> dict[str, Any]:
    """Time ``n`` next_occurrence calls, cold and warm cache, median of 5 runs each."""
    reminders = _reminders(n, seed)
    cold, warm = [], []
    for _ in range(RUNS):
        _clear_caches()
        cold.append(_once(reminders))
        warm.append(_once(reminders))
    median_cold = statistics.median(wall for wall, _ in cold)
    median_warm = statistics.median(wall for wall, _ in warm)
    return {
        "n": n,
        "seed": seed,
        "seconds_median": round(median_cold, 4),
        "runs": [round(wall, 4) for wall, _ in cold],
        "per_item_us": round(median_cold / n * 1e6, 3),
        "cpu_seconds_median": round(statistics.median(cpu for _, cpu in cold), 4),
        "warm_seconds_median": round(median_warm, 4),
        "warm_runs": [round(wall, 4) for wall, _ in warm],
        "warm_per_item_us": round(median_warm / n * 1e6, 3),
        "warm_cpu_seconds_median": round(statistics.median(cpu for _, cpu in warm), 4),
        "after": f"{NOW:%Y-%m-%dT%H:%MZ} + up to 7 days (European DST weekend, worst case)",
        "note": "seconds_median/runs/per_item_us are cold-cache: caches cleared before each run",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="also write the JSON result to this file")
    args = parser.parse_args(argv)
    result = run(args.n, args.seed)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
