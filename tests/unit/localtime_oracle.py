"""A brute-force oracle for ``shared.domain.localtime``, written without its resolution code.

It only ever converts UTC instants to local time (``datetime.fromtimestamp(u, zone)``), never the
other way, and reads the DST policy straight off that walk:

* a wall time that occurs: the earliest UTC instant showing it (so the earlier one in an overlap);
* a wall time that never occurs: the clock jumped over it, so ``wall - offset in force just
  before the jump`` (the send moves forward by the gap's length);
* a local date exists when some instant shows it.
"""

from __future__ import annotations

import datetime as dt
import functools
import zoneinfo
from dataclasses import dataclass

DAY = 86_400
EPOCH_ORD = dt.date(1970, 1, 1).toordinal()
UTC = dt.UTC


def offset_at(zone: zoneinfo.ZoneInfo, u: int) -> int:
    """UTC offset in seconds in force at UTC epoch second ``u``."""
    off = dt.datetime.fromtimestamp(u, zone).utcoffset()
    assert off is not None
    return int(off.total_seconds())


def wall_seconds(d: dt.date, t: dt.time) -> int:
    """A local date and time as seconds on the naive (wall) axis, epoch-aligned."""
    return (d.toordinal() - EPOCH_ORD) * DAY + t.hour * 3600 + t.minute * 60


@dataclass
class ZoneWalk:
    """The zone's UTC timeline over [start, end) as runs of constant offset.

    Built by sampling the offset every ``step`` seconds and bisecting each change to the second:
    two changes closer than a step would be missed, and tz data has none closer than 95 hours
    (``test_transitions_are_days_apart`` checks). Each run is (first second, end, offset).
    """

    tz: str
    start: int
    end: int
    step: int = 3600

    def __post_init__(self) -> None:
        zone = zoneinfo.ZoneInfo(self.tz)
        runs: list[tuple[int, int, int]] = []
        run_start, run_off = self.start, offset_at(zone, self.start)
        u = self.start
        while u < self.end:
            nxt = min(u + self.step, self.end)
            off = offset_at(zone, nxt) if nxt < self.end else run_off
            if off != run_off:
                a, b = u, nxt  # offset_at(a) == run_off != offset_at(b)
                while b - a > 1:
                    mid = (a + b) // 2
                    if offset_at(zone, mid) == run_off:
                        a = mid
                    else:
                        b = mid
                runs.append((run_start, b, run_off))
                run_start, run_off = b, offset_at(zone, b)
            u = nxt
        runs.append((run_start, self.end, run_off))
        self.runs = runs

    def covers_day(self, ordinal: int) -> bool:
        """The walk spans every instant that could show this local date (|offset| < 26 h)."""
        day = ordinal - EPOCH_ORD
        return self.start <= day * DAY - 26 * 3600 and (day + 1) * DAY + 26 * 3600 <= self.end

    def date_exists(self, ordinal: int) -> bool:
        """Some instant shows this local date."""
        assert self.covers_day(ordinal)
        lo, hi = (ordinal - EPOCH_ORD) * DAY, (ordinal - EPOCH_ORD + 1) * DAY
        return any(a + off < hi and lo < b + off for a, b, off in self.runs)

    def resolve(self, wall: int) -> tuple[int, bool]:
        """(UTC epoch seconds, wall time occurs) by the policy, read off the timeline."""
        for a, b, off in self.runs:  # in time order, so the first hit is the earliest instant
            if a <= wall - off < b:
                return wall - off, True
        for (_, b, off), (_, _, next_off) in zip(self.runs, self.runs[1:], strict=False):
            if b + off <= wall < b + next_off:  # the clock jumped from b + off to b + next_off
                return wall - off, False
        raise AssertionError(f"wall {wall} outside the walk of {self.tz}")


def expected_between(
    tz: str,
    t: dt.time,
    start: int,
    end: int,
    offset_minutes: int,
    weekdays: frozenset[int],
) -> list[tuple[dt.date, int]]:
    """(local date, UTC epoch s) of each send with start <= at < end, one per existing date."""
    out = []
    first_day = (start - offset_minutes * 60) // DAY + EPOCH_ORD - 3
    last_day = (end - offset_minutes * 60) // DAY + EPOCH_ORD + 3
    margin = 3 * DAY
    walk = ZoneWalk(
        tz, (first_day - EPOCH_ORD) * DAY - margin, (last_day - EPOCH_ORD) * DAY + margin
    )
    for ordinal in range(first_day, last_day + 1):
        d = dt.date.fromordinal(ordinal)
        if d.weekday() not in weekdays or not walk.date_exists(ordinal):
            continue
        at = walk.resolve(wall_seconds(d, t))[0] + offset_minutes * 60
        if start <= at < end:
            out.append((d, at))
    out.sort(key=lambda pair: pair[1])
    return out


@functools.lru_cache(maxsize=4096)
def transitions(tz: str, year: int, step: int = 6 * 3600) -> tuple[tuple[int, int, int], ...]:
    """(UTC instant, offset before, offset after) of each offset change in a UTC year.

    Samples every ``step`` seconds then bisects to the second; transitions closer than a step
    would be missed, and tz data has none closer than 95 hours.
    """
    zone = zoneinfo.ZoneInfo(tz)
    lo = int(dt.datetime(year, 1, 1, tzinfo=UTC).timestamp())
    hi = int(dt.datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
    found = []
    prev_u, prev_off = lo, offset_at(zone, lo)
    for u in range(lo + step, hi + step, step):
        off = offset_at(zone, u)
        if off != prev_off:
            a, b = prev_u, u  # offset_at(a) == prev_off != offset_at(b)
            while b - a > 1:
                mid = (a + b) // 2
                if offset_at(zone, mid) == prev_off:
                    a = mid
                else:
                    b = mid
            if b < hi:
                found.append((b, prev_off, off))
        prev_u, prev_off = u, off
    return tuple(found)
