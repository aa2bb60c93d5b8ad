"""ISO 8601 instants as operators and app backends type them, parsed by python-dateutil.

``dateutil.parser.isoparse`` takes the whole of ISO 8601's common forms (``2024-05-01T08:00Z``,
``20240501T0800Z``, ``2024-05-01T08``, ``2024-W18-3``, offsets like ``+05:00``) and nothing that
is not ISO 8601 (no "yesterday", no ``05/01/2024``), which is what an entry point wants. The CLI
uses it now; the HTTP API will use the same function so both accept the same text.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from dateutil.parser import isoparse

from shared.errors import InputError

EXAMPLE = "2024-05-01T08:00Z"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def as_time(v: Any) -> dt.datetime | None:
    """A stored instant, aware (a naive one is UTC); None for anything else."""
    if not isinstance(v, dt.datetime):
        return None
    return v if v.tzinfo else v.replace(tzinfo=dt.UTC)


def parse_instant(raw: str | None, *, what: str = "instant") -> dt.datetime | None:
    """An aware UTC datetime for ISO 8601 ``raw`` (naive = UTC); ``None`` stays ``None``.

    Raises ``InputError`` naming ``what`` and the text, with an example of what works.
    """
    if raw is None:
        return None
    text = raw.strip()
    try:
        t = isoparse(text)
    except (ValueError, OverflowError):
        raise InputError(
            f"{what} {raw!r} is not an ISO 8601 instant (for example {EXAMPLE})"
        ) from None
    t = t if t.tzinfo else t.replace(tzinfo=dt.UTC)
    try:
        return t.astimezone(dt.UTC)
    except OverflowError:  # an offset that takes it past year 9999 or before year 1
        raise InputError(f"{what} {raw!r} is out of range") from None
