"""What the parts of a consumer share: the wake-ups it holds and the ids it is sending.

The parts (``intake``, ``prepare``, ``dispatch``, ``recording``) are wired by
``consumer.worker.Consumer``; this module holds the little state they all read, behind one lock,
so each part can be read and tested alone.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from shared.broker import Frame
from shared.expo.pushes import OutgoingPush, PreparedPush
from shared.wire import Item, WakeUp


@dataclass
class Batch:
    """One wake-up being worked on."""

    frame: Frame
    wake: WakeUp
    open: set[str] = field(default_factory=set)  # ids whose outcome is not yet in the database
    # Ids a due group took for sending (from its final check on): they may leave, so their
    # guards are never released by anyone but that due group itself (see ``Recording.release``).
    claimed: set[str] = field(default_factory=set)
    # Ids whose send guard this wake-up took: still its own when a preparation is retried.
    guarded: set[str] = field(default_factory=set)
    released: bool = False  # given back (lost broker, shutdown): send nothing more of it
    acked: bool = False
    prepared: dict[str, PreparedPush] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Held:
    """The wake-ups this consumer holds (by frame key), the ids being sent right now, and
    whether shutdown has begun (``closing``: prepare nothing more, release instead)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: dict[str, Batch] = {}
        self.in_flight: set[str] = set()
        self.closing = False

    def add(self, key: str, batch: Batch) -> None:
        with self.lock:
            self.batches[key] = batch

    def pop(self, key: str) -> None:
        with self.lock:
            self.batches.pop(key, None)

    def all(self) -> list[Batch]:
        with self.lock:
            return list(self.batches.values())

    def take_all(self) -> list[Batch]:
        """Every batch held, forgotten here (the broker will redeliver their frames)."""
        with self.lock:
            out = list(self.batches.values())
            self.batches.clear()
            return out

    def empty(self) -> bool:
        with self.lock:
            return not self.batches

    def sending(self) -> bool:
        return bool(self.in_flight)

    def start_sending(self, ids: set[str]) -> None:
        with self.lock:
            self.in_flight.update(ids)

    def stop_sending(self, ids: set[str]) -> None:
        with self.lock:
            self.in_flight.difference_update(ids)

    def holds(self, message_id: str) -> bool:
        """Whether this consumer holds the message in a live wake-up (or is sending it): a
        second copy of it (a duplicate wake-up) must not take its guard over."""
        with self.lock:
            if message_id in self.in_flight:
                return True
            batches = list(self.batches.values())
        for b in batches:
            with b.lock:
                if not b.released and message_id in b.open:
                    return True
        return False


def push_of(w: WakeUp, i: Item) -> OutgoingPush:
    """The push for item ``i`` of wake-up ``w`` (its data names the message, category, label)."""
    data = {**(i.data or {}), "messageId": i.id, "category": w.category, "label": i.label}
    return OutgoingPush(i.id, i.to, i.title, i.body, data)
