"""Due instants by the policy of docs/architecture.md "Local time", computed here on its own.

A local date D and a wall time resolve in the zone with zoneinfo's ``fold=0``: a wall time in a
gap (spring forward) moves forward by the gap's length, one in an overlap (fall back) is the
earlier instant. The offset is elapsed time added after. Weekdays name local dates.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def due(
    at: str, offset_minutes: int, weekdays: list[str] | None, zone: str, local_date: dt.date
) -> dt.datetime | None:
    """The UTC instant of the occurrence on ``local_date``, or None when its weekday is off."""
    if weekdays is not None and WEEKDAYS[local_date.weekday()] not in weekdays:
        return None
    hh, mm = (int(x) for x in at.split(":"))
    wall = dt.datetime.combine(local_date, dt.time(hh, mm), tzinfo=zoneinfo.ZoneInfo(zone))
    return wall.astimezone(dt.UTC) + dt.timedelta(minutes=offset_minutes)


def occurrences(
    at: str,
    offset_minutes: int,
    weekdays: list[str] | None,
    zone: str,
    start: dt.datetime,
    end: dt.datetime,
) -> list[tuple[dt.date, dt.datetime]]:
    """Every (local date, instant) of the rule due in ``[start, end]``, oldest first."""
    first = start.astimezone(zoneinfo.ZoneInfo(zone)).date() - dt.timedelta(days=2)
    last = end.astimezone(zoneinfo.ZoneInfo(zone)).date() + dt.timedelta(days=2)
    out = []
    day = first
    while day <= last:
        instant = due(at, offset_minutes, weekdays, zone, day)
        if instant is not None and start <= instant <= end:
            out.append((day, instant))
        day += dt.timedelta(days=1)
    return out
