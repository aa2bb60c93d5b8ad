"""Weekdays as a reminder names them: 0 = Monday .. 6 = Sunday, or their three-letter names."""

from __future__ import annotations

from collections.abc import Collection

from shared.errors import InputError

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def parse_weekdays(spec: str | Collection[int] | None) -> list[int] | None:
    """``"mon,wed,fri"`` or ``[0, 2, 4]`` -> sorted list without repeats; None or "" means
    every day (None). Anything else is an ``InputError`` naming the bad day."""
    if spec is None or spec == "":
        return None
    if isinstance(spec, str):
        out = []
        for part in spec.lower().replace(" ", "").split(","):
            if part not in WEEKDAYS:
                raise InputError(f"unknown weekday {part!r} (use {','.join(WEEKDAYS)})")
            out.append(WEEKDAYS.index(part))
        return sorted(set(out))
    days = sorted(set(spec))
    for d in days:
        if not isinstance(d, int) or not 0 <= d <= 6:
            raise InputError(f"weekday {d!r} is outside 0..6 (0 = Monday)")
    return days
