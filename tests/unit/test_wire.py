"""The wake-up wire format: round trip, and every kind of poison refused with a reason."""

from __future__ import annotations

import json

import pytest

from shared.wire import Item, WakeUp, WireError, decode


def item(i: int = 1, **kw: object) -> Item:
    base: dict[str, object] = dict(
        id=f"m{i}",
        due_ms=1_800_000_000_000 + i,
        user="u",
        reminder="r",
        version=1,
        token_id="t",
        to="ExponentPushToken[x]",
    )
    base.update(kw)
    return Item(**base)  # type: ignore[arg-type]


def test_round_trip_keeps_everything() -> None:
    w = WakeUp(
        "w1",
        "meal",
        1_700_000_000_000,
        (item(1, title="Lunch", data={"a": 1}, quiet=["22:00", "07:00"]), item(2)),
    )
    back = decode(w.encode())
    assert back == w
    assert back.first_due_ms == 1_800_000_000_001


def test_encoding_is_compact_json_without_empty_fields() -> None:
    raw = json.loads(WakeUp("w", "meal", 1, (item(),)).encode())
    assert raw["v"] == 1
    assert "title" not in raw["items"][0]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"v": 2, "items": []}', "unsupported wake-up version 2"),
        (b'{"v": 1, "id": "w", "category": "meal", "planned_ms": 1, "items": []}', "non-empty"),
        (b'{"v": 1, "category": "meal", "planned_ms": 1, "items": [{"id": "x"}]}', "bad field"),
        (
            b'{"v": 1, "id": "w", "category": "meal", "planned_ms": 1, '
            b'"items": [{"id": "x", "evil": 1}]}',
            "bad item",
        ),
        (
            b'{"v": 1, "id": "w", "category": "meal", "items": [{"id": "x", "due_ms": 1, '
            b'"user": "u", "reminder": "r", "version": 1, "token_id": "t", "to": "x"}]}',
            "missing field 'planned_ms'",
        ),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_poison_is_refused_with_a_reason(raw: bytes, fragment: str) -> None:
    with pytest.raises(WireError) as exc:
        decode(raw)
    assert fragment in str(exc.value)
