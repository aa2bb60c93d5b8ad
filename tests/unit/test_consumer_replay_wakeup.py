"""A replay's wake-up reaching a consumer that cannot record a replay (the memory twin has no
MongoDB) is dead-lettered whole, with its reason, and nothing of it is sent or left held."""

from __future__ import annotations

import datetime as dt

from shared.broker import Frame
from shared.domain.plan import to_item
from shared.wire import WakeUp
from tests.unit.consumer_rig import T0, make_rig


def test_a_replay_wakeup_on_the_memory_twin_is_dead_lettered_and_nothing_is_sent():
    with make_rig() as rig:
        rig.user("u1")
        doc = rig.message("u1", T0 - dt.timedelta(hours=1))
        wake = WakeUp("w-replay", doc["category"], 0, (to_item(doc),), replay="replay:api:x:1")
        frame = Frame(
            destination=rig.settings.queue(wake.category),
            body=wake.encode(),
            message_id="frame-replay",
            ack_id="1",
            subscription="0",
            redelivered=False,
            headers={},
        )
        rig.consumer.intake.on_frame(frame)
        rig.run_until(T0 + dt.timedelta(seconds=1))
        [(destination, _, headers)] = rig.broker.sent
        assert destination == rig.settings.dlq
        assert "no database to replay with" in headers["tzpush-reason"]
        assert rig.pushes() == [] and rig.consumer.held.empty()
