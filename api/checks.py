"""Checks at the edge: the CLI's own rules, plus what JSON can carry that the CLI never sees.

The rules are the project's (``shared.domain.validation``, ``shared.domain.localtime``): the
same id, label, zone, time-of-day, offset, cap, token and payload checks as ``tzpush users``,
``reminders`` and ``tokens``, with the same messages. JSON adds a few ways to break a document
that the command line cannot produce, refused here so the database never sees them: text with a
lone surrogate (not UTF-8), and in ``data`` keys with a NUL or a leading ``$``, integers past 64
bits, nesting deeper than ``MAX_DATA_DEPTH``. Each check returns the value or raises
``ValueError`` with a message that names the value; pydantic puts the field's name beside it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from shared.domain.localtime import parse_hhmm, validate_timezone
from shared.domain.validation import (
    category_problem,
    id_problem,
    label_problem,
    shown,
    validate_expo_token,
    validate_payload,
)
from shared.domain.weekdays import WEEKDAYS
from shared.errors import InputError
from shared.instants import parse_instant

MAX_DATA_DEPTH = 16
T = TypeVar("T")
INT64 = 2**63
MAX_TEXT = 4096
ID_PATTERN = r"^[^\s/]{1,128}$"
"""What the OpenAPI document says of ids; ``check_id`` is the rule (printable, no space, no
``/`` since an id must fit in one path segment, at most 128 characters)."""
CONFIGURED_CATEGORIES: ContextVar[tuple[str, ...] | None] = ContextVar(
    "configured_categories", default=None
)
"""The categories this process is configured with (``Settings.categories``), set for each
request by the app (``api.app.RequestRules``); ``check_category`` holds names to them, so an
unknown category is named with every other invalid field of the same body."""
# A '+' sent unencoded in a URL query arrives as a space: '...T10:00:00 05:00'.
_PLUS_AS_SPACE = re.compile(r"\d \d{2}(:?\d{2})?$")


def utf8_problem(value: str) -> str | None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a character that is not valid UTF-8 (a lone surrogate)"
    return None


def _refuse(problem: str | None, what: str, value: object) -> None:
    """A rule's problem (``None``: none) as the ``ValueError`` pydantic expects."""
    if problem is not None:
        raise ValueError(f"{what} {shown(value)} {problem}")


def _as_value_error(check: Callable[[str], T], value: str) -> T:
    """A project check that raises ``InputError``, raising ``ValueError`` (same message)."""
    try:
        return check(value)
    except InputError as exc:
        raise ValueError(str(exc)) from None


def _problem_of(check: Callable[[], object]) -> str | None:
    """A project check that raises ``InputError``, as its message (``None``: it passed)."""
    try:
        check()
    except InputError as exc:
        return str(exc)
    return None


def check_id(value: str, what: str = "id") -> str:
    problem = id_problem(value)
    if problem is None and "/" in value:
        problem = "holds a '/' (an id must fit in one URL path segment)"
    _refuse(problem, what, value)
    return value


def check_text(value: str | None) -> str | None:
    if value is not None and (problem := utf8_problem(value)):
        raise ValueError(problem)
    return value


def check_timezone(value: str) -> str:
    return _as_value_error(validate_timezone, value)


def check_hhmm(value: str) -> str:
    return _as_value_error(lambda v: parse_hhmm(v).strftime("%H:%M"), value)


def check_category(name: str) -> str:
    configured = CONFIGURED_CATEGORIES.get()
    problem = None if configured is None else category_problem(name, configured)
    if problem is not None:
        raise ValueError(problem)
    return name


def instant(value: str, what: str, *, in_query: bool = False) -> dt.datetime:
    """An ISO 8601 instant as the CLI reads it (``shared.instants``), aware UTC. ``in_query``:
    read from a URL's query, where an offset's '+' sent unencoded arrives as a space."""
    try:
        parsed = parse_instant(value, what=what)
    except OverflowError:
        raise InputError(f"{what} {shown(value)} is out of range") from None
    except InputError as exc:
        if in_query and _PLUS_AS_SPACE.search(value):
            raise InputError(
                f"{exc} (a '+' in a URL's query must be sent as %2B: a bare '+' means a space)"
            ) from None
        raise
    assert parsed is not None
    return parsed


def check_instant(value: str) -> str:
    try:
        instant(value, "instant")
    except InputError as exc:
        raise ValueError(str(exc).removeprefix("instant ")) from None
    return value


def check_label(value: str) -> str:
    _refuse(label_problem(value), "label", value)
    return value


def check_token(value: str) -> str:
    return _as_value_error(validate_expo_token, value)


def check_weekdays(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    if not value:
        raise ValueError("is empty: leave weekdays out (or null) for every day")
    return sorted(set(value), key=WEEKDAYS.index)


def data_problem(value: Any, depth: int = 0, path: str = "data") -> str | None:
    """What the database or Expo would choke on in a push's ``data``, or ``None``."""
    if depth > MAX_DATA_DEPTH:
        return f"{path} is nested deeper than {MAX_DATA_DEPTH} levels"
    if isinstance(value, str):
        problem = utf8_problem(value)
        return f"{path} {problem}" if problem else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if -INT64 <= value < INT64 else f"{path} {shown(value)} is past 64 bits"
    if isinstance(value, float):
        ok = value == value and value not in (float("inf"), float("-inf"))
        return None if ok else f"{path} is not a finite number"
    if isinstance(value, list):
        for i, item in enumerate(value):
            if problem := data_problem(item, depth + 1, f"{path}[{i}]"):
                return problem
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has a key that is not text"
            if "\x00" in key or key.startswith("$") or utf8_problem(key):
                return f"{path} key {shown(key)} holds a NUL, a leading '$' or a lone surrogate"
            if problem := data_problem(item, depth + 1, f"{path}.{key}"):
                return problem
        return None
    return f"{path} holds a {type(value).__name__}, not a JSON value"


def check_data(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None and (problem := data_problem(value)):
        raise ValueError(problem)
    return value


def payload_problem(
    title: str | None, body: str | None, data: Mapping[str, Any] | None
) -> str | None:
    """Expo's 4 KiB limit on the push as it would be sent (the CLI's check)."""
    return _problem_of(lambda: validate_payload(title, body, data))


def expo_token_problem(value: str) -> str | None:
    return _problem_of(lambda: validate_expo_token(value))
