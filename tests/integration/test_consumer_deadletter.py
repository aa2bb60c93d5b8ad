"""Issue 5: wake-ups a consumer cannot use go to the dead-letter queue, and it carries on."""

from __future__ import annotations

import json
import queue

from shared.broker import Frame
from shared.wire import Item, WakeUp
from tests.integration.consumer_support import in_seconds, ms
from tests.integration.harness import wait_for


def _next(inbox: queue.Queue[Frame], timeout: float = 15.0) -> Frame:
    try:
        return inbox.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"nothing reached the dead-letter queue within {timeout} s") from None


def test_malformed_wakeup_is_dead_lettered_and_consumer_carries_on(world):
    dlq = world.dead_letters()
    world.user("after")
    world.start_consumer()
    garbage = b'{"v": 1, "items": [oops'
    world.broker().send(world.settings.queue("meal"), garbage)

    frame = _next(dlq)
    assert frame.body == garbage
    assert frame.headers["tzpush-reason"].startswith("not JSON")
    assert frame.headers["tzpush-original-destination"] == world.settings.queue("meal")

    mid = world.due_messages(["after"], in_seconds(3))[0]["_id"]
    wait_for(lambda: world.all_terminal([mid]), 20, what="the valid message after the poison")
    assert world.message(mid)["status"] == "success"
    assert len(world.pushes_to("ExponentPushToken[after]")) == 1
    assert dlq.empty()


def test_wakeup_naming_unknown_ids_is_dead_lettered(world):
    dlq = world.dead_letters()
    world.user("real")
    world.start_consumer()
    due = in_seconds(2)
    ghost = Item(
        id="no-such-reminder:1:no-such-token:20990101",
        due_ms=ms(due),
        user="nobody",
        reminder="no-such-reminder",
        version=1,
        token_id="no-such-token",
        to="ExponentPushToken[ghost]",
        title="Ghost",
    )
    wake = WakeUp("meal:ghost", "meal", ms(due), (ghost,))
    world.broker().send(world.settings.queue("meal"), wake.encode())

    frame = _next(dlq)
    assert frame.headers["tzpush-reason"] == "unknown message ids"
    assert [i["id"] for i in json.loads(frame.body)["items"]] == [ghost.id]

    mid = world.due_messages(["real"], in_seconds(3))[0]["_id"]
    wait_for(lambda: world.all_terminal([mid]), 20, what="a valid message after the ghost")
    assert world.message(mid)["status"] == "success"
    assert world.pushes_to("ExponentPushToken[ghost]") == []
    assert dlq.empty()


def test_frames_that_break_a_json_parser_are_dead_lettered_and_the_consumer_goes_on(world):
    """Issue 15: deep nesting (RecursionError), Infinity (OverflowError), a 400-digit instant
    and too many items are refused as wake-ups, whatever the exception inside; the metric
    label comes from a fixed set."""
    dlq = world.dead_letters()
    world.user("survivor")
    world.start_consumer()
    item = {"id": "m", "user": "u", "reminder": "r", "version": 1, "token_id": "t", "to": "x"}
    poison = [
        b'{"v": 1, "items": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        json.dumps(
            {
                "v": 1,
                "id": "w",
                "category": "meal",
                "planned_ms": float("inf"),
                "items": [{**item, "due_ms": 1}],
            }
        ).encode(),
        json.dumps(
            {
                "v": 1,
                "id": "w",
                "category": "meal",
                "planned_ms": 1,
                "items": [{**item, "due_ms": int("9" * 400)}],
            }
        ).encode(),
    ]
    broker = world.broker()
    for body in poison:
        broker.send(world.settings.queue("meal"), body)
    for _ in poison:
        _next(dlq)
    mid = world.due_messages(["survivor"], in_seconds(3))[0]["_id"]
    wait_for(lambda: world.all_terminal([mid]), 20, what="the valid message after the poison")
    assert world.message(mid)["status"] == "success"
    assert len(world.pushes_to("ExponentPushToken[survivor]")) == 1
