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


# -- issue 15: whatever a frame holds, decoding raises WireError (one kind from a fixed set) ----
def _body(**over: object) -> bytes:
    base = json.loads(WakeUp("w1", "meal", 1_700_000_000_000, (item(1),)).encode())
    base.update(over)
    return json.dumps(base).encode()


def _with_item(**over: object) -> bytes:
    it: dict[str, object] = dict(
        id="m1", due_ms=1_800_000_000_000, user="u", reminder="r", version=1, token_id="t", to="x"
    )
    it.update(over)
    return _body(items=[it])


POISON = {
    "deeply nested": b'{"v": 1, "items": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "infinite planned_ms": _body(planned_ms=float("inf")),
    "400-digit due_ms": _with_item(due_ms=int("9" * 400)),
    "negative due_ms": _with_item(due_ms=-5),
    "bool as due_ms": _with_item(due_ms=True),
    "id with a newline": _with_item(id="m\n1"),
    "too many items": _body(items=[json.loads(_with_item())["items"][0]] * 5001),
    "data not an object": _with_item(data=[1, 2]),
    "quiet hours of three": _with_item(quiet=["22:00", "07:00", "x"]),
    "unknown zone": _with_item(tz="Mars/Olympus"),
    "not UTF-8": b'{"v": 1, "id": "\xff"}',
    "a list": b"[1, 2, 3]",
    "huge": b'{"v": 1, "pad": "' + b"x" * (9 * 1024 * 1024) + b'"}',
}


@pytest.mark.parametrize("name", sorted(POISON))
def test_poison_raises_wire_error_with_a_fixed_kind(name: str) -> None:
    with pytest.raises(WireError) as info:
        decode(POISON[name])
    assert info.value.kind in WireError.KINDS
