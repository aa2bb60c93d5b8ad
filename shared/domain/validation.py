"""Input checks for what goes to Expo: push tokens and the size of a message's payload.

Used where input enters (API, CLI, seeding), by the Expo sender before a request is built, and
by the local Expo fake, so all three agree on what a token is and how big a payload may be.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from shared.errors import InputError

MAX_PAYLOAD_BYTES = 4096
"""Expo's limit for one message; we measure it as the message's compact UTF-8 JSON."""

# The official Node SDK's rule (isExpoPushToken): ExponentPushToken[...] / ExpoPushToken[...],
# or a bare 8-4-4-4-12 UUID. We also refuse whitespace and brackets inside the brackets.
_TOKEN = re.compile(
    r"(?:ExponentPushToken|ExpoPushToken)\[[^\[\]\s]{1,200}\]"
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
