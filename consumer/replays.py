"""A replay's wake-up: the consumer sends what an operator's replay took, as the replay's sender.

The API and the console take the messages (``replaying``, held by their run) and queue them
(``ops.replay.queue``); here the consumer takes the hold over and judges, sends and records them
(``shared.replaying.send_replay``) with its own Expo sender: its access token, its share of the
fleet's rate. The frame is acked once that is done, whatever became of the messages: a second
copy of it finds them held by this consumer (or ended) and does nothing, and what a crash here
leaves ``replaying`` is settled by the janitor once the lease runs out (docs/architecture.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from consumer.recording import Recording
from consumer.state import Batch
from shared.clock import Clock
from shared.expo.pushes import Sender
from shared.replaying import send_replay
from shared.settings import Settings

log = logging.getLogger("consumer.worker")


class ReplaySends:
    def __init__(
        self,
        database: Any,
        settings: Settings,
        sender: Sender,
        *,
        cid: str,
        clock: Clock,
        recording: Recording,
        send: Callable[..., Any] = send_replay,
    ) -> None:
        self.database = database  # a MongoDB database: replays are recorded on the messages
        self.settings = settings
        self.sender = sender
        self.cid = cid
        self.clock = clock
        self.recording = recording
        self._send = send

    def send(self, key: str, batch: Batch) -> None:
        """Send the replay's messages this consumer can take, then ack the frame. An error is
        logged (the replay settled what it held: ``Replayer.run``) and the frame acked too:
        what is left is for the operator's next replay, never a second send."""
        w = batch.wake
        try:
            counts = self._send(self.database, self.settings, self.sender, w, self.cid, self.clock)
            done = ", ".join(f"{n} {what}" for what, n in sorted(counts.items())) or "nothing"
            log.info("replay %s (%s): %s", w.replay, w.category, done)
        except Exception:
            log.exception("replay wake-up %s stopped; what it held is settled", w.id)
        self.recording.maybe_ack(key, batch)
