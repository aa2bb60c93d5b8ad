"""Input checks: ids, labels and caps as they enter, push tokens and payload sizes, and whether a
stored document can be used at all. Pure.

The entry checks (``validate_id``, ``validate_label``, ``validate_daily_cap``,
``validate_expo_token``, ``validate_payload``) are used where input enters (API, CLI, seeding),
by the Expo sender before a request is built, and by the local Expo fake, so all agree on what
an id, a token and a payload may be.

The document checks (``reminder_problem``, ``user_problem``, ``token_problem``,
``message_problem``, ``receipt_problem``) say what is wrong with a stored document, in words
that name the field and the value, or ``None``. Every stage that reads documents written by
someone else asks them before it relies on a field: the planner (``shared.domain.plan``), the
janitor, the receipts poller and the consumer's intent check skip what they refuse and report it
(a log line, ``tzpush_bad_documents_total``), and ``tzpush doctor`` lists it. So one bad
document costs its own work, never a loop's (docs/operating.md, "Bad documents").
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from shared.domain.localtime import MAX_OFFSET_MINUTES, LocalTimeError, validate_timezone
from shared.errors import InputError

MAX_ID_LENGTH = 128
"""Ids (users, devices, reminders, tokens) are 1 to 128 printable characters without spaces."""
MAX_LABEL_LENGTH = 100
MAX_DAILY_CAP = 100_000
"""A daily cap above this is a typo (a user cannot read that many pushes in a day)."""
MAX_TICKET_LENGTH = 200

MAX_PAYLOAD_BYTES = 4096
"""Expo's limit for one message; we measure it as the message's compact UTF-8 JSON."""

# The official Node SDK's rule (isExpoPushToken): ExponentPushToken[...] / ExpoPushToken[...],
# or a bare 8-4-4-4-12 UUID. We also refuse whitespace, control characters and brackets inside
# the brackets.
_TOKEN = re.compile(
    r"(?:ExponentPushToken|ExpoPushToken)\[[^\[\]\s\x00-\x1f\x7f]{1,200}\]"
    r"|[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-[0-9A-Za-z]{4}-[0-9A-Za-z]{4}-[0-9A-Za-z]{12}"
)

# Stand-in for the recipient when the caller does not know it yet: as long as a real token gets.
_TOKEN_ALLOWANCE = "ExponentPushToken[" + "x" * 22 + "]"


def is_expo_token(token: object) -> bool:
    """True if ``token`` looks like a push token Expo accepts (no network check)."""
    return isinstance(token, str) and _TOKEN.fullmatch(token) is not None


def validate_expo_token(token: str) -> str:
    """Return ``token`` (surrounding whitespace removed) or raise InputError naming it."""
    cleaned = token.strip() if isinstance(token, str) else token
    if not is_expo_token(cleaned):
        raise InputError(
            f"not an Expo push token: {token!r} "
            "(expected ExponentPushToken[...], ExpoPushToken[...] or a UUID)"
        )
    assert isinstance(cleaned, str)
    return cleaned


def payload_size(message: Mapping[str, Any]) -> int:
    """Bytes of ``message`` as compact UTF-8 JSON: the measure both sender and fake use."""
    return len(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode())


def validate_payload(
    title: str | None,
    body: str | None,
    data: Mapping[str, Any] | None,
    *,
    to: str | None = None,
    **extra: Any,
) -> None:
    """Refuse a message whose Expo JSON (to, title, body, data and ``extra`` fields) is too big.

    ``to`` defaults to an allowance as long as a real token, so a reminder's content can be
    checked before it is bound to a device. ``extra`` takes any further Expo fields
    (``categoryId=``, ``sound=``, ``ttl=``...) so the count matches what is sent.
    """
    if title is not None and not isinstance(title, str):
        raise InputError(f"push title must be text, not {type(title).__name__}")
    if body is not None and not isinstance(body, str):
        raise InputError(f"push body must be text, not {type(body).__name__}")
    if data is not None and not isinstance(data, Mapping):
        raise InputError(f"push data must be a JSON object, not {type(data).__name__}")
    message: dict[str, Any] = {"to": to if to is not None else _TOKEN_ALLOWANCE}
    for key, value in (("title", title), ("body", body), ("data", data)):
        if value is not None:
            message[key] = dict(value) if isinstance(value, Mapping) else value
    message.update({k: v for k, v in extra.items() if v is not None})
    try:
        size = payload_size(message)
    except (TypeError, ValueError) as exc:
        raise InputError(f"push data is not JSON-serialisable: {exc}") from None
    if size > MAX_PAYLOAD_BYTES:
        parts = ", ".join(
            f"{key} {payload_size({key: message[key]}) - len(key) - 5} bytes"
            for key in ("title", "body", "data")
            if key in message
        )
        raise InputError(
            f"push payload is {size} bytes as Expo JSON, over the {MAX_PAYLOAD_BYTES}-byte limit"
            f" ({parts}); shorten the text or the data"
        )


# -- ids, labels and caps where they enter ---------------------------------------------------
def shown(value: object, limit: int = 60) -> str:
    """``value`` as one short line for a message: ``repr`` (control characters escaped), cut."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def id_problem(value: object) -> str | None:
    """What is wrong with an id (user, device, reminder, token), or ``None``.

    Ids are printed in listings and log lines and typed back on command lines: 1 to
    ``MAX_ID_LENGTH`` printable characters, no spaces (so no control character can reach a
    terminal and no id differs from another by invisible whitespace).
    """
    if not isinstance(value, str):
        return f"must be text, not {type(value).__name__}"
    if not value:
        return "is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long (at most {MAX_ID_LENGTH})"
    # isprintable() is False for every space but the ASCII one (tabs, newlines, no-break...)
    if not value.isprintable() or " " in value:
        return "holds a space or a control character"
    return None


def validate_id(value: str, what: str) -> str:
    """Return ``value`` or raise InputError naming ``what`` and the value, on one line."""
    problem = id_problem(value)
    if problem is not None:
        raise InputError(
            f"{what} {shown(value)} {problem} "
            f"(ids are 1 to {MAX_ID_LENGTH} printable characters without spaces)"
        )
    return value


def label_problem(value: object) -> str | None:
    """What is wrong with a reminder's label (1 to 100 printable characters), or ``None``."""
    if not isinstance(value, str):
        return "is missing" if value is None else f"must be text, not {type(value).__name__}"
    if not value.strip():
        return "is empty"
    if len(value) > MAX_LABEL_LENGTH:
        return f"is {len(value)} characters long (at most {MAX_LABEL_LENGTH})"
    if not value.isprintable():
        return "holds a control character"
    return None


def validate_label(value: str) -> str:
    problem = label_problem(value)
    if problem is not None:
        raise InputError(
            f"label {shown(value)} {problem} (1 to {MAX_LABEL_LENGTH} printable characters)"
        )
    return value


def category_problem(name: str, configured: Collection[str]) -> str | None:
    """What is wrong with category ``name`` for a deployment configured with ``configured``."""
    if name in configured:
        return None
    return f"unknown category {shown(name)} (configured: {', '.join(configured)})"


def daily_cap_problem(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DAILY_CAP:
        return f"must be a whole number from 1 to {MAX_DAILY_CAP}"
    return None


def validate_daily_cap(value: int) -> int:
    problem = daily_cap_problem(value)
    if problem is not None:
        raise InputError(f"daily cap {shown(value)} {problem}")
    return value


def quiet_hours_problem(value: object) -> str | None:
    """``None`` (no quiet hours) or two ``HH:MM`` strings, start and end."""
    if value is None:
        return None
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(x, str) and _HHMM.fullmatch(x) for x in value)
    ):
        return "must be two times of day, [HH:MM, HH:MM]"
    return None


# -- stored documents ------------------------------------------------------------------------
class BadDocument(NamedTuple):
    """A stored document a stage refused: what kind, which one, and what is wrong with it."""

    kind: str  # reminder | user | token | message (a fixed set: it labels a metric)
    id: str
    problem: str

    def describe(self) -> str:
        return f"{self.kind} {self.id}: {self.problem}"


def doc_id(doc: object) -> str:
    """A document's ``_id`` as text for a report (``repr`` when it is not a usable id)."""
    value = doc.get("_id") if isinstance(doc, Mapping) else None
    return value if isinstance(value, str) and id_problem(value) is None else shown(value)


_HHMM = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]", re.ASCII)
_MISSING = object()


def _field(doc: Mapping[str, Any], name: str, problem: str | None) -> str | None:
    if problem is None:
        return None
    value = doc.get(name, _MISSING)
    return f"{name} is missing" if value is _MISSING else f"{name} {shown(value)} {problem}"


def _whole(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def reminder_problem(
    reminder: Mapping[str, Any], categories: Collection[str] | None = None
) -> str | None:
    """What makes a stored reminder unplannable, or ``None``. ``categories``: the configured
    ones (a reminder in another category has no queue and no consumer)."""
    if not isinstance(reminder, Mapping):
        return f"is {type(reminder).__name__}, not a document"
    r = reminder
    for name in ("_id", "userId"):
        if problem := _field(r, name, id_problem(r.get(name))):
            return problem
    category = r.get("category")
    if not isinstance(category, str) or not category:
        return _field(r, "category", "is not a category name")
    if categories is not None and category not in categories:
        return f"category {category!r} is not configured"
    if problem := _field(r, "label", label_problem(r.get("label"))):
        return problem
    at = r.get("time")
    if not (isinstance(at, str) and _HHMM.fullmatch(at)):
        return _field(r, "time", "is not a time of day 'HH:MM' (00:00 to 23:59)")
    offset = r.get("offsetMinutes")
    if offset is not None and not _whole(offset, -MAX_OFFSET_MINUTES, MAX_OFFSET_MINUTES):
        limit = MAX_OFFSET_MINUTES
        return _field(r, "offsetMinutes", f"is not a whole number of minutes within +-{limit}")
    weekdays = r.get("weekdays")
    if weekdays is not None and (
        not isinstance(weekdays, list | tuple)
        or not weekdays
        or not all(_whole(d, 0, 6) for d in weekdays)
    ):
        return _field(r, "weekdays", "is not a non-empty list of weekdays 0 (Monday) to 6")
    if "version" in r and not _whole(r["version"], 1, 2**62):
        return _field(r, "version", "is not a whole number >= 1")
    title, body, data = r.get("title"), r.get("body"), r.get("data")
    if not _surely_small(title, body, data):  # the full check costs a JSON encoding
        try:
            validate_payload(title, body, data)
        except InputError as exc:
            return str(exc)
    return None


def _surely_small(title: object, body: object, data: object) -> bool:
    """True when text and flat data are surely JSON and surely under ``MAX_PAYLOAD_BYTES``
    (counting 6 bytes a character, as ``\\u001f`` is): most reminders, checked without
    encoding. False means "ask ``validate_payload``", not "too big"."""
    chars, entries = 0, 0
    for text in (title, body):
        if text is not None:
            if type(text) is not str:
                return False
            chars += len(text)
    if data is not None:
        if type(data) is not dict:
            return False
        for key, value in data.items():
            if type(key) is not str:
                return False
            entries += 1
            chars += len(key)
            if type(value) is str:
                chars += len(value)
            elif not (value is None or type(value) is bool or _whole(value, -(10**15), 10**15)):
                return False
            else:
                chars += 16
    return chars * 6 + entries * 8 + 200 <= MAX_PAYLOAD_BYTES


def user_problem(user: Mapping[str, Any]) -> str | None:
    """What makes a stored user unusable for planning or the intent check, or ``None``."""
    if not isinstance(user, Mapping):
        return f"is {type(user).__name__}, not a document"
    if problem := _field(user, "_id", id_problem(user.get("_id"))):
        return problem
    try:
        validate_timezone(user.get("timezone"))  # type: ignore[arg-type]
    except LocalTimeError:
        return _field(user, "timezone", "is not an IANA time zone")
    prefs = user.get("prefs")
    if prefs is not None:
        if not isinstance(prefs, Mapping):
            return _field(user, "prefs", "is not a document")
        cats = prefs.get("categories")
        if cats is not None and not isinstance(cats, Mapping):
            return f"prefs.categories {shown(cats)} is not a document"
        if problem := quiet_hours_problem(prefs.get("quietHours")):
            return f"prefs.quietHours {shown(prefs.get('quietHours'))} {problem}"
    cap = user.get("dailyCap")
    if cap is not None and (problem := daily_cap_problem(cap)):
        return _field(user, "dailyCap", problem)
    return None


def token_problem(token: Mapping[str, Any]) -> str | None:
    """What makes a stored token registration unusable for planning, or ``None``. Whether the
    token string is one Expo accepts is the sender's question (it refuses and deactivates)."""
    if not isinstance(token, Mapping):
        return f"is {type(token).__name__}, not a document"
    if problem := _field(token, "_id", id_problem(token.get("_id"))):
        return problem
    value = token.get("token")
    if not isinstance(value, str) or not value:
        return _field(token, "token", "is not a push token string")
    return None


def _message_id_problem(message: Mapping[str, Any]) -> str | None:
    if isinstance(message.get("_id"), str) and message.get("_id"):
        return None
    return _field(message, "_id", "is not a message id")


def message_problem(message: Mapping[str, Any]) -> str | None:
    """What makes a pending message unusable by the janitor or a re-arm, or ``None``."""
    if problem := _message_id_problem(message):
        return problem
    category = message.get("category")
    if not isinstance(category, str) or not category:
        return _field(message, "category", "is not a category name")
    if not isinstance(message.get("scheduledAt"), dt.datetime):
        return _field(message, "scheduledAt", "is not a date")
    planned = message.get("plannedAt")
    if planned is not None and not isinstance(planned, dt.datetime):
        return _field(message, "plannedAt", "is not a date")
    return None


def receipt_problem(message: Mapping[str, Any]) -> str | None:
    """What makes a sent message's receipt impossible to ask for or record, or ``None``."""
    if problem := _message_id_problem(message):
        return problem
    ticket = message.get("ticketId")
    if (
        not isinstance(ticket, str)
        or not 0 < len(ticket) <= MAX_TICKET_LENGTH
        or not ticket.isprintable()
        or " " in ticket
    ):
        return _field(message, "ticketId", "is not an Expo ticket id")
    for name in ("notificationTokenId", "userId"):
        value = message.get(name)
        if not isinstance(value, str) or not value:
            return _field(message, name, "is not an id")
    sent = message.get("sentAt")
    if sent is not None and not isinstance(sent, dt.datetime):
        return _field(message, "sentAt", "is not a date")
    return None
