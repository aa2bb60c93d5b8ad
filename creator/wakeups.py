"""The one wake-up publisher: sign, delay, send, flush, count.

Every arming goes through it: a planning pass (its spool merged in due order), a planning of a
few users after a change, and a re-arm from the database (``creator/rearm.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from creator.context import PlanContext
from shared.domain.messages import Doc
from shared.domain.plan import group_wakeups
from shared.wire import SIGNATURE_HEADER, WakeUp, sign

WAKEUP_BATCH = 200  # wake-ups sent between two reads of a stream of them (a pass's spool)

Progress = Callable[[int], object]


class WakeupPublisher:
    """Schedules wake-ups on the broker of a ``PlanContext``."""

    def __init__(self, ctx: PlanContext) -> None:
        self.ctx = ctx

    def send(self, wakeups: list[WakeUp], progress: Progress | None = None) -> list[WakeUp]:
        """Send each wake-up to its category's queue, scheduled ``lead`` before its first due
        instant (at once if that has passed), signed when a signing key is set. Returns
        ``wakeups``. Not confirmed until ``finish``; ``progress`` gets the number of messages
        of each wake-up sent. Connects a broker that dropped; raises ``RuntimeError`` when the
        planner has no broker at all."""
        if not wakeups:
            return wakeups
        broker = self.ctx.broker
        if broker is None:
            raise RuntimeError("planner has no broker connection to arm wake-ups")
        if not broker.connected:  # e.g. dropped while idle between passes
            broker.connect()
        settings = self.ctx.settings
        lead_ms = int(settings.wakeup.lead_seconds * 1000)
        key = settings.stomp.signing_key
        for w in wakeups:
            now_ms = int(self.ctx.clock().timestamp() * 1000)
            delay = max(0, w.first_due_ms - lead_ms - now_ms)
            body = w.encode()
            signed = {SIGNATURE_HEADER: sign(body, key.get_secret_value())} if key else None
            broker.send(settings.queue(w.category), body, delay_ms=delay, headers=signed)
            if progress is not None:
                progress(len(w.items))
        return wakeups

    def finish(self, armed: int) -> None:
        """After ``armed`` wake-ups were sent (0: nothing happens): returns once the broker has
        confirmed them all (one receipt), then counts them (``on_armed``)."""
        if not armed:
            return
        if self.ctx.broker is not None:
            self.ctx.broker.flush()
        if self.ctx.on_armed:
            self.ctx.on_armed(armed)

    def arm(self, docs: Iterable[Doc], progress: Progress | None = None) -> list[WakeUp]:
        """Group messages into wake-ups (``group_wakeups``), send and confirm them; returns the
        wake-ups."""
        c = self.ctx.settings.creator
        wakeups = group_wakeups(
            docs,
            size=c.wakeup_size,
            window_s=self.ctx.settings.wakeup.window_seconds,
            planned_at=self.ctx.clock(),
        )
        self.send(wakeups, progress)
        self.finish(len(wakeups))
        return wakeups

    def arm_all(self, wakeups: Iterable[WakeUp]) -> int:
        """Send a stream of wake-ups ``WAKEUP_BATCH`` at a time (the stream is read between
        batches), then confirm them all; returns how many."""
        armed = 0
        batch: list[WakeUp] = []
        for w in wakeups:
            batch.append(w)
            if len(batch) >= WAKEUP_BATCH:
                armed += len(self.send(batch, None))
                batch = []
        armed += len(self.send(batch, None))
        self.finish(armed)
        return armed
