"""Issue 5: wake-ups a consumer cannot use go to the dead-letter queue, and it carries on."""

from __future__ import annotations

import json
import queue

from shared.broker import Frame, StompClient
from shared.wire import Item, WakeUp
from tests.integration.consumer_support import in_seconds, ms
from tests.integration.harness import World, wait_for


def _dlq(world: World) -> queue.Queue[Frame]:
    inbox: queue.Queue[Frame] = queue.Queue()
    client = StompClient(world.settings, inbox=inbox).connect()
    world.clients.append(client)
    client.subscribe(world.settings.dlq, prefetch=10)
    return inbox


def _next(inbox: queue.Queue[Frame], timeout: float = 15.0) -> Frame:
    try:
        return inbox.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"nothing reached the dead-letter queue within {timeout} s") from None


def test_malformed_wakeup_is_dead_lettered_and_consumer_carries_on(world):
    dlq = _dlq(world)
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
    dlq = _dlq(world)
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
