"""The wake-up: what goes over the broker, typed and versioned. JSON, never pickle.

A wake-up names up to N message ids of one category due within a short window, and carries a
snapshot of what to send so the consumer needs no per-message read before the due instant (the
database stays the truth through the send guard and the intent-change log, see
docs/architecture.md). Anything that does not decode raises ``WireError``: the consumer
dead-letters it and never retries it.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any

from shared.domain.localtime import validate_timezone
from shared.errors import PermanentError

VERSION = 1


class WireError(PermanentError):
    """A frame that is not a valid wake-up. ``kind`` is one of ``KINDS`` (metric labels and log
    fields come from this fixed set, never from the frame's own text); the message says what
    is wrong for a person."""

    KINDS = frozenset(
        {
            "not_json",
            "not_object",
            "bad_version",
            "too_large",
            "bad_field",
            "too_many_items",
            "bad_signature",
            "unknown_category",
            "unknown_ids",
            "consumer_error",
        }
    )

    def __init__(self, kind: str, message: str) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"unknown wire error kind {kind!r}")
        super().__init__(message)
        self.kind = kind


# What a wake-up may hold. A frame outside these bounds is refused whole: nothing the broker
# hands over can make a consumer loop, overflow or allocate without bound.
MAX_FRAME_BYTES = 24 * 1024 * 1024  # 5000 items of Expo's 4 KiB payloads fit
MAX_ITEMS = 5000  # the largest wakeup_size settings allow
MAX_ID_CHARS = 300
MAX_TEXT_CHARS = 10_000
MIN_EPOCH_MS = 0
MAX_EPOCH_MS = 7_258_118_400_000  # 2200-01-01
SIGNATURE_HEADER = "tzpush-signature"


@dataclass(frozen=True, slots=True)
class Item:
    """One message to send: its id plus the snapshot taken when it was planned."""

    id: str
    due_ms: int  # scheduledAt, epoch milliseconds UTC
    user: str
    reminder: str
    version: int  # reminder version when planned
    token_id: str
    to: str
    title: str | None = None
    body: str | None = None
    data: dict[str, Any] | None = None
    local_date: str = ""  # YYYY-MM-DD in the user's zone
    label: str = ""
    tz: str = "UTC"
    cap: int | None = None  # the user's daily cap when planned
    quiet: list[str] | None = None  # ["22:00", "07:00"] when planned

    @property
    def due(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.due_ms / 1000, dt.UTC)


@dataclass(frozen=True, slots=True)
class WakeUp:
    """A batch of messages of one category, armed with AMQ_SCHEDULED_DELAY."""

    id: str
    category: str
    planned_ms: int  # when the snapshot was read (intent changes after it are rechecked)
    items: tuple[Item, ...] = field(default_factory=tuple)
    # Set by ``tzpush rebuild`` on wake-ups whose messages it found guarded by a consumer that
    # stopped: the consumer may take those guards over, as for a redelivered frame. Optional on
    # the wire (absent means False), so frames of older creators still decode.
    takeover: bool = False
    # Set on a replay's wake-up (``ops.replay.queue``): the replay run that took its messages
    # (``replaying``, held by that run). A consumer sends them as the replay's sender
    # (``shared.replaying``), not as pending messages. Optional on the wire like ``takeover``.
    replay: str | None = None

    @property
    def first_due_ms(self) -> int:
        return min(i.due_ms for i in self.items)

    def encode(self) -> bytes:
        body = {
            "v": VERSION,
            "id": self.id,
            "category": self.category,
            "planned_ms": self.planned_ms,
            "items": [_item_dict(i) for i in self.items],
        }
        if self.takeover:  # only when set: every other frame is byte for byte what it was
            body["takeover"] = True
        if self.replay is not None:
            body["replay"] = self.replay
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


_ITEM_FIELDS = tuple(Item.__dataclass_fields__)


def _item_dict(item: Item) -> dict[str, Any]:
    # Not dataclasses.asdict: it deep-copies every value, which dominated arming 100k messages.
    out: dict[str, Any] = {}
    for name in _ITEM_FIELDS:
        v = getattr(item, name)
        if v is not None and v != "":
            out[name] = v
    return out


def decode(raw: bytes | str) -> WakeUp:
    """Parse and validate a frame body; raise ``WireError`` (and only that) saying what is wrong.

    Whatever the body holds (deep nesting, ``Infinity``, a 400-digit number, a million items),
    the only exception is a ``WireError``: the consumer dead-letters it and goes on.
    """
    try:
        return _decode(raw)
    except WireError:
        raise
    except RecursionError:
        raise WireError("not_json", "not JSON: nested too deeply") from None
    except Exception as exc:  # any other surprise is still a bad frame, never a crash
        raise WireError("bad_field", f"bad field: {type(exc).__name__}") from None


def _decode(raw: bytes | str) -> WakeUp:
    if len(raw) > MAX_FRAME_BYTES:
        raise WireError("too_large", f"frame of {len(raw)} bytes, over {MAX_FRAME_BYTES}")
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError("not_json", f"not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise WireError("not_object", "not a JSON object")
    if body.get("v") != VERSION:
        version = repr(body.get("v"))[:20]
        raise WireError("bad_version", f"unsupported wake-up version {version} (want {VERSION})")
    items_raw = body.get("items")
    if not isinstance(items_raw, list) or not items_raw:
        raise WireError("bad_field", "bad field: items must be a non-empty list")
    if len(items_raw) > MAX_ITEMS:
        raise WireError("too_many_items", f"{len(items_raw)} items, over {MAX_ITEMS}")
    items = tuple(_item(it, n) for n, it in enumerate(items_raw))
    for key in ("id", "category", "planned_ms"):
        if key not in body:
            raise WireError("bad_field", f"missing field {key!r}")
    takeover = body.get("takeover", False)
    if not isinstance(takeover, bool):
        raise WireError("bad_field", "bad field: takeover must be true or false")
    replay = body.get("replay")
    return WakeUp(
        id=_ident(body["id"], "id"),
        category=_ident(body["category"], "category"),
        planned_ms=_epoch_ms(body["planned_ms"], "planned_ms"),
        items=items,
        takeover=takeover,
        replay=None if replay is None else _ident(replay, "replay"),
    )


def _no_constant(name: str) -> Any:
    raise WireError("not_json", f"not JSON: {name} is not a number")


def _item(raw: Any, n: int) -> Item:
    where = f"items[{n}]"
    if not isinstance(raw, dict):
        raise WireError("bad_field", f"bad field: {where} is not an object")
    unknown = set(raw) - set(_ITEM_FIELDS)
    if unknown:
        raise WireError("bad_field", f"bad item: {where} has unknown fields ({len(unknown)})")
    for key in ("id", "due_ms", "user", "reminder", "version", "token_id", "to"):
        if key not in raw:
            raise WireError("bad_field", f"bad field: {where} lacks {key!r}")
    version = raw["version"]
    if type(version) is not int or not 1 <= version <= 10**9:
        raise WireError("bad_field", f"bad field: {where}.version is not a version number")
    data = raw.get("data")
    if data is not None and not isinstance(data, dict):
        raise WireError("bad_field", f"bad field: {where}.data is not an object")
    cap = raw.get("cap")
    if cap is not None and (type(cap) is not int or not 1 <= cap <= 10**6):
        raise WireError("bad_field", f"bad field: {where}.cap is not a daily cap")
    return Item(
        id=_ident(raw["id"], f"{where}.id"),
        due_ms=_epoch_ms(raw["due_ms"], f"{where}.due_ms"),
        user=_ident(raw["user"], f"{where}.user"),
        reminder=_ident(raw["reminder"], f"{where}.reminder"),
        version=version,
        token_id=_ident(raw["token_id"], f"{where}.token_id"),
        to=_text(raw["to"], f"{where}.to", MAX_ID_CHARS),
        title=_text(raw.get("title"), f"{where}.title", MAX_TEXT_CHARS, optional=True),
        body=_text(raw.get("body"), f"{where}.body", MAX_TEXT_CHARS, optional=True),
        data=data,
        local_date=_text(raw.get("local_date", ""), f"{where}.local_date", 10),
        label=_text(raw.get("label", ""), f"{where}.label", MAX_ID_CHARS),
        tz=_zone(raw.get("tz", "UTC"), f"{where}.tz"),
        cap=cap,
        quiet=_quiet(raw.get("quiet"), f"{where}.quiet"),
    )


def _ident(value: Any, where: str) -> str:
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_ID_CHARS
        or not value.isprintable()
        or any(c.isspace() for c in value)
    ):
        raise WireError("bad_field", f"bad field: {where} is not an id (printable, 1-300 chars)")
    return value


def _text(value: Any, where: str, limit: int, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise WireError("bad_field", f"bad field: {where} is not text of at most {limit} chars")
    return value


def _epoch_ms(value: Any, where: str) -> int:
    if type(value) is not int or not MIN_EPOCH_MS <= value <= MAX_EPOCH_MS:
        raise WireError("bad_field", f"bad field: {where} is not an instant before 2200")
    return value


def _zone(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _known_zone(value):
        raise WireError("bad_field", f"bad field: {where} is not an IANA time zone")
    return value


@functools.lru_cache(maxsize=1024)
def _known_zone(name: str) -> bool:
    try:
        validate_timezone(name)
    except Exception:
        return False
    return True


def _quiet(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, str) and _HHMM.fullmatch(v) for v in value)
    ):
        raise WireError("bad_field", f"bad field: {where} is not a pair of HH:MM times")
    return list(value)


_HHMM = re.compile(r"(?:[01]\d|2[0-3]):[0-5]\d")


def sign(body: bytes, key: str) -> str:
    """The signature header of a wake-up's body: HMAC-SHA256 with the fleet's key, hex."""
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def check_signature(body: bytes, signature: str | None, key: str) -> None:
    """Raise ``WireError`` unless ``signature`` is ``sign(body, key)`` (constant-time compare)."""
    if not signature:
        raise WireError("bad_signature", "unsigned wake-up")
    if not hmac.compare_digest(signature, sign(body, key)):
        raise WireError("bad_signature", "wake-up signature does not match")
