"""Cursor pages: ``limit`` (1 to 200), ``after`` (an opaque cursor), and a ``next`` link.

A cursor is the list's kind and the sort key of the last item of a page, as URL-safe base64
of compact JSON, so a page never skips or repeats an item when items are added or removed
meanwhile (an offset would). A cursor is a position, not a credential (the key's scope guards
what a list shows): one made by hand for this list is served from that position; one that does
not decode, or that names another list, is refused (422, naming ``after``).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request

from api.problems import field_error, invalid

MAX_LIMIT = 200
DEFAULT_LIMIT = 50


def encode(kind: str, key: list[Any]) -> str:
    """The cursor after ``key`` in the list ``kind`` (``reminders``, ``devices``...)."""
    raw = json.dumps([kind, *key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


NOT_OURS = "is not a cursor this list gave out"


def decode(cursor: str | None, kind: str, shape: tuple[type, ...]) -> list[Any] | None:
    """The sort key in ``cursor`` (a list whose items have the types of ``shape``), given out
    by the list ``kind``; or None."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        key = None
    if (
        not isinstance(key, list)
        or len(key) != len(shape) + 1
        or key[0] != kind
        or not all(type(v) is t for v, t in zip(key[1:], shape, strict=True))
    ):
        raise invalid([field_error("after", NOT_OURS, "query")])
    return key[1:]


def next_link(request: Request, params: dict[str, Any], cursor: str | None) -> str | None:
    """The URL (path and query) of the next page, or None on the last page. The path is the
    request's as it was sent (still percent-encoded), so an id holding ``%41`` or ``%2F``
    names the same resource when the link is followed."""
    if cursor is None:
        return None
    query = {k: v for k, v in params.items() if v is not None}
    query["after"] = cursor
    raw = request.scope.get("raw_path")
    path = raw.decode("ascii", "replace") if isinstance(raw, bytes) else quote(request.url.path)
    return f"{path}?{urlencode(query)}"
