"""Intake: take one frame; a valid, authentic wake-up is held until its lead time, the rest is
dead-lettered with one log line, and the consumer goes on."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor

from consumer.link import BrokerLink
from consumer.state import Batch, Held
from consumer.timers import Timers
from shared import metrics
from shared.broker import Frame
from shared.clock import instant_ms
from shared.settings import Settings
from shared.wire import SIGNATURE_HEADER, WireError, check_signature, decode

log = logging.getLogger("consumer.worker")


class Intake:
    def __init__(
        self,
        settings: Settings,
        *,
        held: Held,
        link: BrokerLink,
        timers: Timers,
        prep_pool: Executor,
        prepare: Callable[[str, Batch], None],
        replay: Callable[[str, Batch], None] | None = None,
        replay_pool: Executor | None = None,
    ) -> None:
        self.settings = settings
        self.held = held
        self.link = link
        self.timers = timers
        self.prep_pool = prep_pool
        self.prepare = prepare
        self.replay = replay  # a replay's wake-up (``consumer.replays``), on its own pool
        self.replay_pool = replay_pool
        key = settings.stomp.signing_key
        # Wake-ups must carry its signature (None: loopback broker).
        self.signing_key = key.get_secret_value() if key is not None else None

    def on_frame(self, frame: Frame) -> None:
        """Take one frame: anything that is not a valid, authentic wake-up of a configured
        category is dead-lettered; a wake-up is held and prepared at its first due instant
        less the lead time (at once if that has passed); a replay's is sent at once."""
        try:
            if self.signing_key is not None:
                signature = frame.headers.get(SIGNATURE_HEADER)
                check_signature(frame.body, signature, self.signing_key)
            wake = decode(frame.body)
            if wake.category not in self.settings.categories:
                raise WireError("unknown_category", f"unknown category {wake.category[:64]!r}")
            if wake.replay is not None and (self.replay is None or self.replay_pool is None):
                raise WireError("consumer_error", "this consumer has no database to replay with")
        except WireError as exc:
            self.link.dead_letter(frame, exc.kind, str(exc))
            return
        except Exception:
            log.exception("bug while taking frame %s; dead-lettering it", frame.message_id)
            self.link.dead_letter(frame, "consumer_error", "consumer error while decoding")
            return
        metrics.WAKEUPS.labels(wake.category, "received").inc()
        batch = Batch(frame, wake)
        key = f"{frame.message_id}:{frame.ack_id}"
        self.held.add(key, batch)
        if wake.replay is not None and self.replay is not None and self.replay_pool is not None:
            self.replay_pool.submit(self.replay, key, batch)  # taken by a replay: due now
            return
        lead_ms = int(self.settings.wakeup.lead_seconds * 1000)
        self.timers.at(
            instant_ms(wake.first_due_ms - lead_ms),
            lambda: self.prep_pool.submit(self.prepare, key, batch),
        )
