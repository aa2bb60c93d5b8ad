"""Benchmark: resolve ``next_occurrence`` for many reminders spread over time zones.

    python -m bench.localtime_bench [--n 100000] [--seed 1] [--out FILE]

Reminders are seeded-random: half from a realistic list of user zones, half from every zone in
the tz database, random HH:MM, offsets of 0 or up to ±90 minutes, a quarter with weekday filters.
Each of 11 runs first clears the module's caches (cold) and then repeats the same work (warm);
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

from shared.domain import localtime

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
RUNS = 11
NOW = dt.datetime(2026, 3, 28, 23, 17, 42, tzinfo=dt.UTC)  # a weekend with European DST
TYPICAL = dt.datetime(2026, 6, 13, 23, 17, 42, tzinfo=dt.UTC)  # a week with no change anywhere


def _reminders(
    n: int, seed: int, start: dt.datetime = NOW
) -> list[tuple[dt.time, str, dt.datetime, int, Any]]:
    rng = random.Random(seed)
    all_zones = sorted(zoneinfo.available_timezones() - localtime.NOT_USER_ZONES)
    out = []
    for _ in range(n):
        tz = rng.choice(REALISTIC_ZONES if rng.random() < 0.5 else all_zones)
        t = dt.time(rng.randrange(24), rng.randrange(60))
        after = start + dt.timedelta(seconds=rng.randrange(7 * 86_400))
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
    localtime._known_zones.clear()


def _once(reminders: list[tuple[dt.time, str, dt.datetime, int, Any]]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) for one pass; CPU time is steadier on a shared machine."""
    next_occurrence = localtime.next_occurrence
    t0, c0 = time.perf_counter(), time.process_time()
    for t, tz, after, offset, weekdays in reminders:
        next_occurrence(t, tz, after, offset_minutes=offset, weekdays=weekdays)
    return time.perf_counter() - t0, time.process_time() - c0


def _floor_once(reminders: list[tuple[dt.time, str, dt.datetime, int, Any]]) -> float:
    """The least any next_occurrence must cost here: the same call, returning the same kind of
    value (an Occurrence holding a new date and a new aware datetime), with no work at all."""

    def no_work(
        local_time: dt.time,
        tz: str,
        after: dt.datetime,
        *,
        offset_minutes: int = 0,
        weekdays: Any = None,
    ) -> localtime.Occurrence:
        return localtime.Occurrence(
            dt.date.fromordinal(740_000), dt.datetime.fromtimestamp(1_790_000_000, dt.UTC)
        )

    t0 = time.perf_counter()
    for t, tz, after, offset, weekdays in reminders:
        no_work(t, tz, after, offset_minutes=offset, weekdays=weekdays)
    return time.perf_counter() - t0


def _medians(reminders: list[tuple[dt.time, str, dt.datetime, int, Any]]) -> dict[str, Any]:
    cold, warm, floor = [], [], []
    for _ in range(RUNS):
        _clear_caches()
        cold.append(_once(reminders))
        warm.append(_once(reminders))
        floor.append(_floor_once(reminders))
    return {
        "cold": statistics.median(wall for wall, _ in cold),
        "cold_runs": [round(wall, 4) for wall, _ in cold],
        "cold_cpu": statistics.median(cpu for _, cpu in cold),
        "warm": statistics.median(wall for wall, _ in warm),
        "warm_runs": [round(wall, 4) for wall, _ in warm],
        "warm_cpu": statistics.median(cpu for _, cpu in warm),
        "floor": statistics.median(floor),
        # Ratios per run (same moment, same machine load), then the median.
        "cold_x_floor": statistics.median(c[0] / f for c, f in zip(cold, floor, strict=True)),
        "warm_x_floor": statistics.median(w[0] / f for w, f in zip(warm, floor, strict=True)),
    }


def run(n: int = 100_000, seed: int = 1) -> dict[str, Any]:
    """Time ``n`` next_occurrence calls, cold and warm cache, median of 11 runs each, in the
    worst-case week (the headline) and in a week with no offset change anywhere."""
    worst = _medians(_reminders(n, seed))
    typical = _medians(_reminders(n, seed, TYPICAL))
    return {
        "n": n,
        "seed": seed,
        "seconds_median": round(worst["cold"], 4),
        "runs": worst["cold_runs"],
        "per_item_us": round(worst["cold"] / n * 1e6, 3),
        "cpu_seconds_median": round(worst["cold_cpu"], 4),
        "warm_seconds_median": round(worst["warm"], 4),
        "warm_runs": worst["warm_runs"],
        "warm_per_item_us": round(worst["warm"] / n * 1e6, 3),
        "warm_cpu_seconds_median": round(worst["warm_cpu"], 4),
        "after": f"{NOW:%Y-%m-%dT%H:%MZ} + up to 7 days (European DST weekend, worst case)",
        "floor_seconds_median": round(worst["floor"], 4),
        "cold_x_floor": round(worst["cold_x_floor"], 2),
        "warm_x_floor": round(worst["warm_x_floor"], 2),
        "typical_week": {
            "after": f"{TYPICAL:%Y-%m-%dT%H:%MZ} + up to 7 days (no offset change anywhere)",
            "seconds_median": round(typical["cold"], 4),
            "warm_seconds_median": round(typical["warm"], 4),
            "cold_x_floor": round(typical["cold_x_floor"], 2),
            "warm_x_floor": round(typical["warm_x_floor"], 2),
            "runs": typical["cold_runs"],
        },
        "note": "seconds_median/runs/per_item_us are cold-cache: caches cleared before each run; "
        "x_floor: time over the floor (the same 100k calls returning a new Occurrence and doing "
        "nothing else), per run, median",
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
