"""The wake-up: what goes over the broker, typed and versioned. JSON, never pickle.

A wake-up names up to N message ids of one category due within a short window, and carries a
snapshot of what to send so the consumer needs no per-message read before the due instant (the
database stays the truth through the send guard and the intent-change log, see
docs/architecture.md). Anything that does not decode raises ``WireError``: the consumer
dead-letters it and never retries it.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from shared.errors import PermanentError

VERSION = 1


class WireError(PermanentError):
    """A frame that is not a valid wake-up (bad JSON, wrong version, missing or bad fields)."""


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
    """Parse a frame body; raise WireError saying what is wrong."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise WireError("not a JSON object")
    if body.get("v") != VERSION:
        raise WireError(f"unsupported wake-up version {body.get('v')!r} (expected {VERSION})")
    try:
        items_raw = body["items"]
        if not isinstance(items_raw, list) or not items_raw:
            raise WireError("items must be a non-empty list")
        items = []
        for it in items_raw:
            if not isinstance(it, dict) or not set(it) <= set(_ITEM_FIELDS):
                raise WireError(f"bad item: {str(it)[:120]}")
            item = Item(**it)
            if not isinstance(item.id, str) or not isinstance(item.due_ms, int):
                raise WireError(f"bad item id or due_ms: {str(it)[:120]}")
            items.append(item)
        takeover = body.get("takeover", False)
        if not isinstance(takeover, bool):
            raise WireError(f"takeover must be true or false, not {takeover!r}")
        wake = WakeUp(
            id=str(body["id"]),
            category=str(body["category"]),
            planned_ms=int(body["planned_ms"]),
            items=tuple(items),
            takeover=takeover,
        )
    except KeyError as exc:
        raise WireError(f"missing field {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise WireError(f"bad field: {exc}") from None
    return wake
