"""The optional ``replay`` mark of a replay's wake-up: backward compatible both ways."""

from __future__ import annotations

import json

import pytest

from shared.wire import Item, WakeUp, WireError, decode

ITEM = Item("m1", 1_700_000_000_000, "u1", "r1", 1, "t1", "ExponentPushToken[x]")


def test_a_replay_mark_survives_the_round_trip() -> None:
    w = WakeUp("w1", "meal", 1_700_000_000_000, (ITEM,), replay="replay:api:oncall:abc")
    assert decode(w.encode()) == w


def test_a_wakeup_without_the_mark_is_byte_for_byte_what_it_was() -> None:
    raw = WakeUp("w1", "meal", 1_700_000_000_000, (ITEM,)).encode()
    assert "replay" not in json.loads(raw)
    assert decode(raw).replay is None


@pytest.mark.parametrize("value", ['""', "true", '"a b"', "12"])
def test_a_replay_mark_that_is_not_a_run_id_is_refused(value: str) -> None:
    raw = WakeUp("w1", "meal", 1_700_000_000_000, (ITEM,)).encode().decode()
    with pytest.raises(WireError, match="replay"):
        decode(raw[:-1] + f', "replay": {value}}}')
