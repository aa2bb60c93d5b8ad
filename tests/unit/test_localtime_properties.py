"""shared.domain.localtime against a brute-force oracle, over every zone in the tz database.

The oracle (``localtime_oracle``) only converts UTC to local time. Generated cases are biased
toward transition days: most pick a zone's real gap or overlap in a year from 1990 to 2037 and a
wall time inside it, on its edges or near it; the rest are ordinary days. A deterministic test
then walks every zone's transitions in 2024-2026 and checks each gap and overlap.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import itertools
import zoneinfo
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from shared.domain.localtime import (
    NOT_USER_ZONES,
    Occurrence,
    next_occurrence,
    occurrences_between,
)
from tests.unit.localtime_oracle import DAY, EPOCH_ORD, expected_between, transitions

ZONES = sorted(zoneinfo.available_timezones() - NOT_USER_ZONES)
ALL_DAYS = frozenset(range(7))


def _change_years(tz: str) -> list[int]:
    """Years 1990-2037 whose 1 January, 1 July and next 1 January offsets are not all equal."""
    zone = zoneinfo.ZoneInfo(tz)
    jan = {
        y: dt.datetime(y, 1, 1, tzinfo=dt.UTC).astimezone(zone).utcoffset()
        for y in range(1990, 2039)
    }
    jul = {
        y: dt.datetime(y, 7, 1, tzinfo=dt.UTC).astimezone(zone).utcoffset()
        for y in range(1990, 2038)
    }
    return [y for y in range(1990, 2038) if len({jan[y], jul[y], jan[y + 1]}) > 1]


def _tzif_changes(tz: str) -> list[tuple[int, int, int]]:
    """(UTC instant, offset before, offset after) of each change in the zone's compiled table."""
    from zoneinfo import _common  # type: ignore[attr-defined]  # the TZif reader

    path = zoneinfo._tzpath.find_tzfile(tz)  # type: ignore[attr-defined]
    if path is not None:
        handle = open(path, "rb")  # noqa: SIM115
    else:
        handle = importlib.resources.files("tzdata.zoneinfo").joinpath(tz).open("rb")
    with handle:
        trans_idx, trans_utc, utcoff, *_ = _common.load_data(handle)
    changes, previous = [], utcoff[0] if utcoff else 0
    for u, idx in zip(trans_utc, trans_idx, strict=True):
        if utcoff[idx] != previous:
            changes.append((u, previous, utcoff[idx]))
            previous = utcoff[idx]
    return changes


CHANGE_YEARS = {tz: years for tz in ZONES if (years := _change_years(tz))}
CHANGING_ZONES = sorted(CHANGE_YEARS)
# Date-line moves and other jumps of 12 hours or more since 1970 (Apia's lost 2011-12-30...).
BIG_JUMPS = [
    (tz, u, before, after)
    for tz in ZONES
    for u, before, after in _tzif_changes(tz)
    if u >= 0 and abs(after - before) >= 12 * 3600
]
PROPERTY_SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def instant(seconds: int, micros: int = 0) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).replace(microsecond=micros)


def as_pairs(occurrences: list[Occurrence]) -> list[tuple[dt.date, int]]:
    return [(o.local_date, int(o.at.timestamp())) for o in occurrences]


@dataclass(frozen=True)
class Case:
    tz: str
    local_date: dt.date
    local_time: dt.time
    offset_minutes: int
    weekdays: frozenset[int] | None
    near_transition: bool


@st.composite
def cases(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(["transition"] * 7 + ["big jump", "ordinary"] + ["any"]))
    if kind == "transition":
        tz = draw(st.sampled_from(CHANGING_ZONES))
        year = draw(st.sampled_from(CHANGE_YEARS[tz]))
        found = transitions(tz, year)
    elif kind == "big jump":
        tz, *jump = draw(st.sampled_from(BIG_JUMPS))
        found = (tuple(jump),)
    else:
        tz = draw(st.sampled_from(ZONES))
        year = draw(st.integers(1990, 2037))
        found = ()
    near = bool(found)
    if near:
        u, before, after = draw(st.sampled_from(found))
        lo, hi = sorted((u + before, u + after))  # the gap's or the overlap's wall times
        where = draw(st.sampled_from(["inside", "edge", "near"]))
        if where == "inside":
            wall = lo + 60 * draw(st.integers(0, max(0, (hi - lo) // 60 - 1)))
        elif where == "edge":
            wall = draw(st.sampled_from([lo - 60, lo, hi - 60, hi]))
        else:
            wall = lo + 60 * draw(st.integers(-36 * 60, 36 * 60))
        wall -= wall % 60
    else:
        first = dt.date(year, 1, 1).toordinal() - EPOCH_ORD
        wall = (first + draw(st.integers(0, 364))) * DAY + 60 * draw(st.integers(0, 1439))
    offset = draw(
        st.one_of(st.just(0), st.sampled_from([-1440, -60, 5, 90, 1440]), st.integers(-1440, 1440))
    )
    weekdays = draw(st.none() | st.frozensets(st.integers(0, 6), min_size=1))
    local = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=wall)
    return Case(tz, local.date(), local.time(), offset, weekdays, near)


def window_start(case: Case, shift: int) -> int:
    """UTC seconds around the case's local date (as if it were UTC), moved by ``shift``."""
    return (case.local_date.toordinal() - EPOCH_ORD) * DAY + shift


@PROPERTY_SETTINGS
@given(case=cases(), shift=st.integers(-2 * DAY, DAY), length=st.integers(0, 4 * DAY))
def test_occurrences_between_matches_oracle(case: Case, shift: int, length: int) -> None:
    start = window_start(case, shift)
    end = start + length
    got = occurrences_between(
        case.local_time,
        case.tz,
        instant(start),
        instant(end),
        offset_minutes=case.offset_minutes,
        weekdays=case.weekdays,
    )
    days = ALL_DAYS if case.weekdays is None else case.weekdays
    want = expected_between(case.tz, case.local_time, start, end, case.offset_minutes, days)
    assert as_pairs(got) == want
    # One send per existing allowed local date, strictly increasing, all aware UTC.
    instants = [o.at for o in got]
    assert instants == sorted(set(instants))
    assert len({o.local_date for o in got}) == len(got)
    assert all(o.at.tzinfo is dt.UTC and o.local_date.weekday() in days for o in got)


@PROPERTY_SETTINGS
@given(
    case=cases(),
    delta=st.one_of(st.sampled_from([-1, 0, 1]), st.integers(-2 * DAY, 2 * DAY)),
    micros=st.sampled_from([0, 1, 999_999]),
)
@example(
    case=Case("Pacific/Apia", dt.date(2011, 12, 29), dt.time(23, 59), 1440, frozenset({4}), True),
    delta=-1,
    micros=0,
)
def test_next_occurrence_matches_oracle(case: Case, delta: int, micros: int) -> None:
    # Anchor `after` on the case's own send (if its date exists) so gap/overlap sends are the
    # ones found; the oracle's answer is the first of its list strictly after `after`.
    days = ALL_DAYS if case.weekdays is None else case.weekdays
    around = window_start(case, -DAY)
    anchor = expected_between(
        case.tz, case.local_time, around, around + 3 * DAY, case.offset_minutes, ALL_DAYS
    )
    mine = [at for d, at in anchor if d == case.local_date]
    after_s = (mine[0] if mine else around + DAY) + delta
    after = instant(after_s, micros)
    # Four weeks: at least three sends with any weekdays, even across a skipped local day
    # (Apia, Fridays, 23:59 + 1440 min from 2011-12-29: the third send was 22 days + 1 min on).
    horizon = after_s + 29 * DAY
    want = expected_between(
        case.tz, case.local_time, after_s + 1, horizon, case.offset_minutes, days
    )
    got = next_occurrence(
        case.local_time,
        case.tz,
        after,
        offset_minutes=case.offset_minutes,
        weekdays=case.weekdays,
    )
    assert (got.local_date, int(got.at.timestamp())) == want[0]
    assert got.at > after
    # Chaining next_occurrence walks the same list occurrences_between returns.
    chained = [got]
    while len(chained) < 3:
        chained.append(
            next_occurrence(
                case.local_time,
                case.tz,
                chained[-1].at,
                offset_minutes=case.offset_minutes,
                weekdays=case.weekdays,
            )
        )
    assert as_pairs(chained) == want[:3]


def test_generated_cases_hit_transitions() -> None:
    """The bias works: most generated cases sit on a real gap or overlap."""
    seen: list[Case] = []

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(case=cases())
    def collect(case: Case) -> None:
        seen.append(case)

    collect()
    assert sum(c.near_transition for c in seen) >= len(seen) * 0.6
    assert any(c.tz in {jump[0] for jump in BIG_JUMPS} for c in seen)


def expected_send(wall: int, u: int, before: int, after: int) -> int:
    """Analytic policy for a wall time near one transition at UTC ``u`` (before -> after).

    Before the later of the two wall readings of the transition, the old offset applies: that is
    the earlier instant in an overlap and the shift forward by the gap's length in a gap.
    """
    return wall - before if wall < u + max(before, after) else wall - after


@pytest.mark.parametrize("year", [2024, 2025, 2026])
def test_every_zone_transition(year: int) -> None:
    checked = 0
    for tz in ZONES:
        for u, before, after in transitions(tz, year, step=DAY):
            lo, hi = sorted((u + before, u + after))
            assert hi - lo < DAY, f"{tz} skips a whole day at {u}"
            walls = {lo - 60, lo, lo + (hi - lo) // 120 * 60, hi - 60, hi}
            for wall in walls:
                local = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=wall)
                want = expected_send(wall, u, before, after)
                got = next_occurrence(local.time(), tz, instant(want - 1))
                assert got == Occurrence(local.date(), instant(want)), (tz, local, before, after)
                between = occurrences_between(local.time(), tz, instant(want), instant(want + 1))
                assert between == [got]
                checked += 1
    assert checked > 1000  # hundreds of zones have DST


def test_transitions_are_days_apart() -> None:
    """The module's per-day cache and the oracle's sampling assume no two transitions in a day.

    Reads every zone's compiled transitions (TZif) directly; the POSIX rule that extends a zone
    past its table switches at most twice a year.
    """
    closest = min(
        later[0] - earlier[0]
        for tz in ZONES
        for earlier, later in itertools.pairwise(_tzif_changes(tz))
        if earlier[0] > -2_208_988_800  # from 1900 on
    )
    assert closest > 3 * DAY  # _steady_offset probes every 3 days


@pytest.mark.parametrize(("tz", "u", "before", "after"), BIG_JUMPS)
def test_big_jumps_match_oracle(tz: str, u: int, before: int, after: int) -> None:
    """Date-line moves: a skipped local date gets no send, a repeated one gets one."""
    jump_day = (u + before) // DAY
    start, end = (jump_day - 3) * DAY, (jump_day + 4) * DAY
    for hhmm in ["00:00", "00:01", "10:00", "23:59"]:
        t = dt.time(int(hhmm[:2]), int(hhmm[3:]))
        for offset in (0, -1440, 1440):
            got = occurrences_between(t, tz, instant(start), instant(end), offset_minutes=offset)
            want = expected_between(tz, t, start, end, offset, ALL_DAYS)
            assert as_pairs(got) == want, (tz, hhmm, offset)
        for weekday in range(7):  # the skipped date's own weekday must wait a week
            got_next = next_occurrence(t, tz, instant(start), weekdays=[weekday])
            want_next = expected_between(tz, t, start + 1, end + 7 * DAY, 0, frozenset([weekday]))
            assert as_pairs([got_next]) == want_next[:1], (tz, hhmm, weekday)
