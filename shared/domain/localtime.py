"""Local-time core: when does a daily reminder at a user's local wall time fire, in UTC?

Pure (no I/O, ``now`` is always passed in). The DST policy, in one place:

* Each local date D gets at most one send: D + ``local_time`` resolved in the zone, then
  ``offset_minutes`` added as elapsed time (so "5 minutes later" is always 300 s later).
* Gap (spring forward): a wall time that does not exist moves forward by the gap's length
  (02:30 in a one-hour gap fires at 03:30), as zoneinfo's ``fold=0``, RFC 5545 and cron do.
* Overlap (fall back): a wall time that happens twice fires once, at the earlier instant.
* A local date that does not exist at all (Pacific/Apia skipped 2011-12-30) adds no send.
* Lists are sorted by instant and never hold two sends at one instant. Two existing dates can only
  collide if the clock jumps a whole day in mid-day (no zone in the tz database does); the send
  whose wall time really exists wins, then the earlier local date.

Never do local arithmetic on aware datetimes with ``timedelta(days=1)``: days are walked as
proleptic ordinals and each one is resolved on its own. Speed comes from caches: per (zone,
UTC date) whether the offset is steady for the surrounding fortnight (then the next send is
arithmetic), per (zone, date) the offsets at the start of the day and of the next (equal on all
but a few days a year, and then any wall time that day is ``wall - offset``), and per (zone,
date, minute) the full resolution on the rare transition days. They assume at most one
transition per 3 days, which the tz database honours (closest pair: 95 h, Freetown 1939).
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from collections.abc import Collection
from typing import NamedTuple

from shared.errors import InputError

__all__ = [
    "MAX_OFFSET_MINUTES",
    "LocalTimeError",
    "Occurrence",
    "next_occurrence",
    "occurrences_between",
    "parse_hhmm",
    "validate_timezone",
]

MAX_OFFSET_MINUTES = 1440
_DAY = 86_400
_EPOCH_ORD = dt.date(1970, 1, 1).toordinal()
_ONE_SECOND = dt.timedelta(seconds=1)
_ONE_MICRO = dt.timedelta(microseconds=1)
_US = 1_000_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ALL_DAYS = frozenset(range(7))
_MIDNIGHT = dt.time()
_HHMM = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])", re.ASCII)


class LocalTimeError(InputError):
    """A time zone, time of day, instant, offset or weekday the local-time core refuses."""


class Occurrence(NamedTuple):
    """One send: the user's local date it belongs to and the aware UTC instant it fires at.

    Immutable and slotted; a named tuple because it is built for every reminder a planner
    resolves, and a tuple is the cheapest immutable value Python can build (a frozen dataclass
    costs half as much again).
    """

    local_date: dt.date
    at: dt.datetime


# Files of the host's zone database that load but are no user's IANA zone: "localtime" is the
# host's own zone, "Factory" a placeholder (offset 0, abbreviation "-00"), "posixrules" a rules
# template; "right/..." (clocks that count leap seconds: 27 s off today) and "posix/..." are
# copies of the database some systems ship beside it.
NOT_USER_ZONES = frozenset({"localtime", "Factory", "posixrules"})
COPY_PREFIXES = ("right/", "posix/")


def _zone(tz: str) -> zoneinfo.ZoneInfo:
    if not isinstance(tz, str) or tz in NOT_USER_ZONES:
        raise LocalTimeError(f"unknown time zone {tz!r}")
    if tz.startswith(COPY_PREFIXES):
        name = tz.split("/", 1)[1]
        raise LocalTimeError(
            f"unknown time zone {tz!r}: {tz.split('/')[0]}/ names a copy of the zone database "
            f"with other rules, not an IANA zone; use {name!r}"
        )
    zone = _load_zone(tz)
    _known_zones.add(tz)
    return zone


_known_zones: set[str] = set()  # validated names, for a cheap membership test on hot paths


@functools.cache  # bounded by the tz database: failed look-ups raise and are not cached
def _load_zone(tz: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise LocalTimeError(f"unknown time zone {tz!r}") from None


def validate_timezone(tz: str) -> str:
    """Return ``tz`` if it names an IANA time zone, else raise ``LocalTimeError`` naming it.

    Used wherever a zone enters the system, so a typo is refused at once, not at send time.
    """
    _zone(tz)
    return tz


def parse_hhmm(s: str) -> dt.time:
    """Parse a 24-hour ``'HH:MM'`` string (``'07:30'``) into a naive ``time``.

    Reminders are minute-precise; anything else ('7:30', '24:00', '07:30:00') is refused with a
    message naming the value rather than silently reinterpreted.
    """
    m = _HHMM.fullmatch(s) if isinstance(s, str) else None
    if m is None:
        raise LocalTimeError(f"time of day must be 'HH:MM' (00:00 to 23:59), got {s!r}")
    return dt.time(int(m[1]), int(m[2]))


def _checked_rule(
    local_time: dt.time, tz: str, offset_minutes: int, weekdays: Collection[int] | None
) -> tuple[int, int, frozenset[int]]:
    """(minute of day, offset in seconds, allowed weekdays) of a valid reminder rule, else raise.

    One call with the common case tested first, as next_occurrence runs for every reminder.
    """
    if not isinstance(local_time, dt.time):
        raise LocalTimeError(f"local_time must be a datetime.time, got {local_time!r}")
    if local_time.tzinfo is not None:
        raise LocalTimeError(
            f"local_time must be naive (the zone is given apart), got {local_time}"
        )
    if local_time.second or local_time.microsecond:
        raise LocalTimeError(f"local_time must be whole minutes, got {local_time}")
    if type(tz) is not str or tz not in _known_zones:
        _zone(tz)
    if (
        type(offset_minutes) is not int
        or not -MAX_OFFSET_MINUTES <= offset_minutes <= MAX_OFFSET_MINUTES
    ):
        raise LocalTimeError(
            f"offset_minutes must be an integer from -{MAX_OFFSET_MINUTES} to "
            f"{MAX_OFFSET_MINUTES}, got {offset_minutes!r}"
        )
    days = _ALL_DAYS if weekdays is None else _weekday_set(weekdays)
    return local_time.hour * 60 + local_time.minute, offset_minutes * 60, days


_DAY_SETS = [frozenset(d for d in range(7) if mask >> d & 1) for mask in range(127)] + [_ALL_DAYS]


def _weekday_set(weekdays: Collection[int]) -> frozenset[int]:
    mask = 0
    for d in weekdays:
        if type(d) is not int or not 0 <= d <= 6:  # type: True == 1, but is not a weekday
            raise LocalTimeError(f"weekday must be 0 (Monday) to 6 (Sunday), got {d!r}")
        mask |= 1 << d
    if not mask:
        raise LocalTimeError("weekdays is empty: the reminder would never fire")
    return _DAY_SETS[mask]


def _since_epoch(value: dt.datetime, name: str) -> dt.timedelta:
    """Exact time since the epoch of an aware datetime (UTC, the usual case, checked first)."""
    if not isinstance(value, dt.datetime) or (
        value.tzinfo is not dt.UTC and value.utcoffset() is None
    ):
        raise LocalTimeError(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value - _EPOCH


def _epoch_micros(value: dt.datetime, name: str) -> int:
    """Exact microseconds since the epoch, so comparisons with sends are integer comparisons."""
    return _since_epoch(value, name) // _ONE_MICRO


@functools.lru_cache(maxsize=1 << 16)
def _day_offsets(tz: str, ordinal: int) -> tuple[int, int]:
    """UTC offsets (s) at local 00:00 of this date and of the next (fold=0 for both).

    With at most one transition per day (tz data has none closer than 95 h), equal offsets mean
    no transition starts inside this day, so every wall time that day is ``wall - offset``.
    """
    zone = _load_zone(tz)
    start = dt.datetime.combine(dt.date.fromordinal(ordinal), dt.time(), zone).utcoffset()
    end = dt.datetime.combine(dt.date.fromordinal(ordinal + 1), dt.time(), zone).utcoffset()
    assert start is not None and end is not None
    return start // _ONE_SECOND, end // _ONE_SECOND


@functools.lru_cache(maxsize=1 << 16)
def _resolve_on_transition_day(tz: str, ordinal: int, minute: int) -> tuple[int, bool]:
    """(UTC epoch seconds, wall time exists) for one wall time on a day with a transition."""
    zone = _load_zone(tz)
    wall = dt.datetime.combine(dt.date.fromordinal(ordinal), dt.time(minute // 60, minute % 60))
    # fold=0 is the policy: in a gap zoneinfo applies the offset from *before* the transition,
    # which lands the gap's length later; in an overlap it is the first (earlier) reading.
    utc = wall.replace(tzinfo=zone, fold=0).astimezone(dt.UTC)
    exists = utc.astimezone(zone).replace(tzinfo=None) == wall  # round trip fails only in a gap
    return (utc - _EPOCH) // _ONE_SECOND, exists


def _resolve(tz: str, ordinal: int, minute: int) -> tuple[int, bool] | None:
    """Send instant (epoch s, before the offset) for one local date; None if the date is skipped."""
    start, end = _day_offsets(tz, ordinal)
    if start == end:
        return (ordinal - _EPOCH_ORD) * _DAY + minute * 60 - start, True
    if end - start >= _DAY:
        # The clock jumped from this day's 00:00 straight to the next day's (Apia 2011-12-30):
        # the whole date is inside the gap, so it has no send of its own.
        return None
    return _resolve_on_transition_day(tz, ordinal, minute)


def _occurrence(ordinal: int, at: int) -> Occurrence:
    return Occurrence(dt.date.fromordinal(ordinal), dt.datetime.fromtimestamp(at, dt.UTC))


@functools.lru_cache(maxsize=1 << 16)
def _steady_offset(tz: str, utc_ordinal: int) -> int | None:
    """The one UTC offset of local dates utc_ordinal-3 .. utc_ordinal+3, or None if it changes.

    The first date whose send is after a search starting on this UTC date is utc_ordinal-1 ..
    utc_ordinal+2 (every UTC offset is under 24 h), and the arithmetic needs that date and the one
    before it; a later date that a weekday filter picks is resolved on its own. Transitions are
    at least 95 h apart, so probing local midnight every 3 days cannot miss one.
    """
    zone = _load_zone(tz)
    offsets = {
        dt.datetime.combine(dt.date.fromordinal(o), _MIDNIGHT, zone).utcoffset()
        for o in (utc_ordinal - 3, utc_ordinal, utc_ordinal + 3)
    }
    if len(offsets) != 1:
        return None
    (offset,) = offsets
    assert offset is not None
    return offset // _ONE_SECOND


def _from_first(
    tz: str, minute: int, first: int, s: int, days: frozenset[int], steady_until: int
) -> tuple[int, int] | None:
    """(ordinal, r) of the first allowed date from ``first`` on, the first date whose send is
    after the search's floor; dates up to ``steady_until`` are known steady at offset ``s``.

    Earlier dates cannot send later and later dates cannot send earlier (sends only reorder if
    the offset moves by a day or more, and then the date in between is skipped), so a later
    allowed date is still the answer, resolved on its own; None if that date does not exist.
    """
    ordinal = first
    if days is not _ALL_DAYS:
        while (ordinal - 1) % 7 not in days:  # ordinal 1 (0001-01-01) was a Monday
            ordinal += 1
    if ordinal <= steady_until:
        return ordinal, (ordinal - _EPOCH_ORD) * _DAY + minute * 60 - s
    resolved = _resolve(tz, ordinal, minute)
    return None if resolved is None else (ordinal, resolved[0])


def _next_by_days(
    tz: str, minute: int, floor_s: int, days: frozenset[int]
) -> tuple[int, int] | None:
    """``_next_general``'s answer from per-day offsets when the transition is not on the answer's
    date or the one before it (most searches near a transition); None when it is.

    With local dates first-1 and first both steady at offset s, r(first-1) <= floor_s < r(first)
    by construction, so ``first`` is the first date whose send is after floor_s.
    """
    s = _day_offsets(tz, floor_s // _DAY + _EPOCH_ORD)[0]
    first = (floor_s + s - minute * 60) // _DAY + _EPOCH_ORD + 1
    if _day_offsets(tz, first - 1) != (s, s) or _day_offsets(tz, first) != (s, s):
        return None
    return _from_first(tz, minute, first, s, days, first)


def _next_general(tz: str, minute: int, floor_s: int, days: frozenset[int]) -> tuple[int, int]:
    """(ordinal, r) of the first date whose send instant r (before the offset) is > floor_s."""
    # r = wall(D) - utcoffset with |utcoffset| < 24 h (gaps too: they use the offset before), so
    # dates with wall(D) + 24 h <= floor_s cannot qualify, and once wall(D) - 24 h >= the best r
    # so far, neither this date nor any later one can beat it.
    ordinal = floor_s // _DAY + _EPOCH_ORD - 1
    tod = minute * 60
    best: tuple[int, bool, int] | None = None  # (r, wall time missing, ordinal): the tie-break
    while True:
        wall = (ordinal - _EPOCH_ORD) * _DAY + tod
        if best is not None and wall - _DAY >= best[0]:
            return best[2], best[0]
        if wall + _DAY > floor_s and (ordinal - 1) % 7 in days:
            resolved = _resolve(tz, ordinal, minute)
            if resolved is not None and resolved[0] > floor_s:
                candidate = (resolved[0], not resolved[1], ordinal)
                if best is None or candidate < best:
                    best = candidate
        ordinal += 1


def next_occurrence(
    local_time: dt.time,
    tz: str,
    after: dt.datetime,
    *,
    offset_minutes: int = 0,
    weekdays: Collection[int] | None = None,
) -> Occurrence:
    """The first send strictly after ``after`` of a reminder at ``local_time`` in ``tz``.

    ``weekdays`` (0=Monday..6=Sunday, None = every day) filters on the local date. This is what the
    scheduler calls after each send, for every reminder, so the usual case is one cache hit and
    integer arithmetic.
    """
    if (  # the checks of _checked_rule and _since_epoch, inline for the usual case
        type(local_time) is dt.time
        and local_time.tzinfo is None
        and not local_time.second
        and not local_time.microsecond
        and type(tz) is str
        and tz in _known_zones
        and type(offset_minutes) is int
        and -MAX_OFFSET_MINUTES <= offset_minutes <= MAX_OFFSET_MINUTES
        and type(after) is dt.datetime
        and after.tzinfo is dt.UTC
    ):
        minute = local_time.hour * 60 + local_time.minute
        off = offset_minutes * 60
        days = _ALL_DAYS if weekdays is None else _weekday_set(weekdays)
        since = after - _EPOCH
    else:
        minute, off, days = _checked_rule(local_time, tz, offset_minutes, weekdays)
        since = _since_epoch(after, "after")
    # Search before the offset: the send r + off > after  <=>  r > floor(after) - off, because
    # sends are whole seconds (timedelta keeps its microseconds non-negative: days*DAY+seconds
    # is the floor).
    floor_s = since.days * _DAY + since.seconds - off
    utc_ordinal = floor_s // _DAY + _EPOCH_ORD
    steady = _steady_offset(tz, utc_ordinal)
    found = None
    if steady is not None:
        # No transition near: r(D) = wall(D) - steady for local dates up to utc_ordinal+2, so
        # the first date with r > floor_s is plain arithmetic.
        first = (floor_s + steady - minute * 60) // _DAY + _EPOCH_ORD + 1
        found = _from_first(tz, minute, first, steady, days, utc_ordinal + 2)
    ordinal, r = (
        found
        or _next_by_days(tz, minute, floor_s, days)
        or _next_general(tz, minute, floor_s, days)
    )
    return _occurrence(ordinal, r + off)


def occurrences_between(
    local_time: dt.time,
    tz: str,
    start: dt.datetime,
    end: dt.datetime,
    *,
    offset_minutes: int = 0,
    weekdays: Collection[int] | None = None,
) -> list[Occurrence]:
    """Every send with ``start <= at < end``, sorted by instant, at most one per instant.

    Used to plan a window of sends (and to catch up after downtime) in one call.
    """
    minute, off, days = _checked_rule(local_time, tz, offset_minutes, weekdays)
    start_us = _epoch_micros(start, "start")
    end_us = _epoch_micros(end, "end")
    best: dict[int, tuple[bool, int]] = {}  # instant -> (not exists, ordinal): the tie-break
    # Same bounds as next_occurrence: a date's send is within two days of its UTC date.
    lo = (start_us // _US - off) // _DAY + _EPOCH_ORD - 2
    hi = (end_us // _US - off) // _DAY + _EPOCH_ORD + 2
    for ordinal in range(lo, hi + 1):
        if (ordinal - 1) % 7 not in days:
            continue
        resolved = _resolve(tz, ordinal, minute)
        if resolved is None:
            continue
        at = resolved[0] + off
        if start_us <= at * _US < end_us:
            key = (not resolved[1], ordinal)
            if at not in best or key < best[at]:
                best[at] = key
    return [_occurrence(best[at][1], at) for at in sorted(best)]
