"""Issue 15: the broker carries, it does not decide. With a signing key set, a wake-up whose
signature does not match its body (forged or altered on the broker: another recipient, another
text) is dead-lettered and nothing of it is pushed; signed wake-ups still arrive after the
broker's scheduler held them (the signature travels as a header through AMQ_SCHEDULED_DELAY)."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

from pydantic import SecretStr

from shared.domain.plan import to_item
from shared.wire import WakeUp
from tests.integration.consumer_support import in_seconds
from tests.integration.harness import World, wait_for

KEY = "test-signing-key-0123456789abcdef"
SIGNATURE_HEADER = "tzpush-signature"  # the wire's header, spelled out: the test's own oracle


def sign(body: bytes, key: str) -> str:
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


EVIL = "ExponentPushToken[evil]"


def _keyed(world: World) -> None:
    stomp = world.settings.stomp.model_copy(update={"signing_key": SecretStr(KEY)})
    world.settings = world.settings.model_copy(update={"stomp": stomp})


def test_forged_wakeups_are_dead_lettered_and_signed_ones_arrive_through_the_scheduler(world):
    _keyed(world)
    dlq = world.dead_letters()
    world.user("victim")
    world.start_consumer()
    # The genuine wake-up, signed by the planner, held by the broker's scheduler until its lead.
    doc = world.due_messages(["victim"], in_seconds(5))[0]
    # Someone who reaches the broker sends the same message id to their own token, at once:
    # unsigned, and signed with the right key over another body.
    evil = dataclasses.replace(to_item(doc), to=EVIL, title="Gotcha")
    planned_ms = int(doc["plannedAt"].timestamp() * 1000)
    raw = WakeUp("meal:forged", "meal", planned_ms, (evil,)).encode()
    broker = world.broker()
    broker.send(world.settings.queue("meal"), raw)
    broker.send(world.settings.queue("meal"), raw, headers={SIGNATURE_HEADER: sign(b"{}", KEY)})
    broker.flush()
    wait_for(lambda: world.all_terminal([doc["_id"]]), 20, what="the message to end")
    assert world.pushes_to(EVIL) == [], "a forged wake-up redirected the push"
    assert world.message(doc["_id"])["status"] == "success"
    assert len(world.pushes_to("ExponentPushToken[victim]")) == 1
    reasons = {dlq.get(timeout=15).headers["tzpush-reason"] for _ in range(2)}
    assert reasons == {"unsigned wake-up", "wake-up signature does not match"}
