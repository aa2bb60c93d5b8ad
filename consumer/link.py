"""The broker session as the consumer's parts use it: ack a frame, dead-letter, park bad ids.

``client`` is replaced at each reconnect by ``consumer.worker.Consumer`` (``None`` between
sessions); a frame of a lost session cannot be acked or dead-lettered, it is redelivered.
"""

from __future__ import annotations

import logging

from shared import metrics
from shared.broker import Frame, StompClient
from shared.settings import Settings
from shared.wire import Item, WakeUp, WireError

log = logging.getLogger("consumer.worker")


class BrokerLink:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client: StompClient | None = None

    def connected(self) -> bool:
        client = self.client
        return client is not None and client.connected

    def ack(self, frame: Frame) -> None:
        """Ack ``frame`` on the current session (raises ``TransientError`` if it is lost)."""
        client = self.client
        if client is not None:
            client.ack(frame)

    def dead_letter(self, frame: Frame, kind: str, reason: str) -> None:
        """Park the frame on the dead-letter queue with its reason; ``kind`` (one of
        ``WireError.KINDS``) is the metric label, so frame text never becomes a label."""
        log.error("dead-lettering wake-up %s (%s): %s", frame.message_id, kind, reason[:300])
        metrics.DLQ.labels(kind if kind in WireError.KINDS else "consumer_error").inc()
        client = self.client
        if client is None:
            return
        client.send(
            self.settings.dlq,
            frame.body,
            headers={
                "tzpush-reason": reason[:500],
                "tzpush-original-destination": frame.destination,
            },
        )
        client.ack(frame)

    def park_unknown(self, wake: WakeUp, unknown: list[Item]) -> None:
        """Put the items of ``wake`` that name no stored message on the dead-letter queue."""
        bad = WakeUp(wake.id, wake.category, wake.planned_ms, tuple(unknown))
        log.error(
            "wake-up %s names %d unknown message ids; dead-lettering them", wake.id, len(unknown)
        )
        metrics.DLQ.labels("unknown_ids").inc()
        client = self.client
        if client is not None:
            client.send(
                self.settings.dlq, bad.encode(), headers={"tzpush-reason": "unknown message ids"}
            )
