"""The optional ``takeover`` mark of a rebuilt wake-up: backward compatible both ways."""

from __future__ import annotations

import json

import pytest

from shared.wire import Item, WakeUp, WireError, decode

ITEM = Item("m1", 1_800_000_000_000, "u", "r", 1, "t", "ExponentPushToken[x]")


def test_a_takeover_mark_survives_the_round_trip() -> None:
    w = WakeUp("w1", "meal", 1_700_000_000_000, (ITEM,), takeover=True)
    back = decode(w.encode())
    assert back == w and back.takeover is True


def test_an_unmarked_frame_is_encoded_as_before_and_a_frame_without_the_field_decodes() -> None:
    raw = WakeUp("w1", "meal", 1, (ITEM,)).encode()
    assert "takeover" not in json.loads(raw)
    old = (
        b'{"v":1,"id":"w1","category":"meal","planned_ms":1,"items":[{"id":"m1",'
        b'"due_ms":1800000000000,"user":"u","reminder":"r","version":1,"token_id":"t",'
        b'"to":"ExponentPushToken[x]","tz":"UTC"}]}'
    )
    assert raw == old
    assert decode(old).takeover is False


@pytest.mark.parametrize("value", ['"yes"', "1", "null", "{}"])
def test_a_takeover_mark_that_is_not_a_boolean_is_refused(value: str) -> None:
    body = json.loads(WakeUp("w1", "meal", 1, (ITEM,)).encode())
    raw = json.dumps(body)[:-1] + f', "takeover": {value}}}'
    with pytest.raises(WireError, match="takeover"):
        decode(raw)
