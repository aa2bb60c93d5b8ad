"""How a wake-up's messages end, and the wake-up with them.

Terminal decisions taken without sending (cancelled, is_missed) go to the recorder; ids close as
their outcomes land in the database; the frame is acked once none is open. A wake-up given back
(lost broker, shutdown) releases the guards of the items that certainly never left, and only
those; one that hit a bug is dead-lettered.
"""

from __future__ import annotations

import logging
from typing import Any

from consumer.judge import End
from consumer.link import BrokerLink
from consumer.recorder import Job, Recorder
from consumer.state import Batch, Held
from shared.clock import Clock
from shared.errors import TransientError
from shared.settings import Settings
from shared.store.abc import ConsumerStores, Ending, Outcome
from shared.store.journal import merge_journal
from shared.store.mongo import StoreError
from shared.wire import Item

log = logging.getLogger("consumer.worker")


class Recording:
    def __init__(
        self,
        settings: Settings,
        stores: ConsumerStores,
        *,
        cid: str,
        clock: Clock,
        held: Held,
        link: BrokerLink,
        recorder: Recorder,
        stats: dict[str, int],
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.cid = cid
        self.clock = clock
        self.held = held
        self.link = link
        self.recorder = recorder
        self.stats = stats

    def merge_journal(self, **kw: Any) -> int:
        """Merge journaled outcomes left unmerged (``shared.store.journal.merge_journal``)."""
        return merge_journal(
            self.stores,
            receipts_delay_s=self.settings.outcomes.receipts_delay_s,
            max_failures=self.settings.outcomes.max_token_failures,
            clock=self.clock,
            **kw,
        )

    def finish(self, key: str, batch: Batch, ends: list[End]) -> None:
        """Record terminal decisions taken without sending (cancelled, is_missed)."""
        if not ends:
            return
        now = self.clock()
        updates: list[Outcome | Ending] = [
            Ending(it.id, status, reason, now, fields={"consumer": self.cid})
            for it, status, reason in ends
        ]
        outcomes = [(batch.wake.category, status) for _, status, _ in ends]
        ids = [it.id for it, _, _ in ends]
        for it, status, reason in ends:
            log.info(
                "message %s %s: %s",
                it.id,
                status,
                reason,
                extra={"message_id": it.id, "user_id": it.user, "category": batch.wake.category},
            )
        self.recorder.put(Job(updates, [], outcomes, done=lambda: self.close_ids(key, batch, ids)))

    def close_ids(self, key: str, batch: Batch, ids: list[str]) -> None:
        """These ids' outcomes are in the database; ack the wake-up if none is left open."""
        with batch.lock:
            batch.open.difference_update(ids)
            empty = not batch.open
        if empty:
            self.maybe_ack(key, batch)

    def maybe_ack(self, key: str, batch: Batch) -> None:
        """Ack the wake-up once, if nothing of it is open and it was not given back."""
        with batch.lock:
            if batch.acked or batch.released or batch.open:
                return
            batch.acked = True
        try:
            self.link.ack(batch.frame)
        except TransientError as exc:
            log.warning(
                "ack of %s failed (%s): it will be redelivered and skipped", batch.wake.id, exc
            )
        self.held.pop(key)
        self.stats["batches"] += 1

    def dead_letter_batch(self, key: str, batch: Batch, reason: str) -> None:
        try:
            self.link.dead_letter(batch.frame, "consumer_error", reason)
        finally:
            self.held.pop(key)

    def release(self, batch: Batch, items: list[Item]) -> None:
        """Give the wake-up back (lost broker, shutdown): send nothing more of it, and release
        the guards of those ``items`` that certainly never left, i.e. no due group claimed them.

        A claimed item may be in a request already: its guard stays, and whoever gets the
        redelivered frame decides from this consumer's journal and attempt records (a takeover).
        """
        with batch.lock:
            batch.released = True
            free = [i.id for i in items if i.id not in batch.claimed]
        self.release_guards(free)

    def unclaim(self, batch: Batch, items: list[Item]) -> None:
        """A due group gives back items it claimed and certainly did not send."""
        with batch.lock:
            batch.claimed.difference_update(i.id for i in items)
        self.release_guards([i.id for i in items])

    def release_guards(self, ids: list[str], budget_s: float | None = None) -> None:
        """Delete this consumer's guards of ``ids``; ``budget_s`` bounds the whole attempt
        (server selection included), as at shutdown."""
        if not ids:
            return
        try:
            self.stores.guards.release(ids, self.cid, budget_s=budget_s)
        except StoreError as exc:
            log.warning("could not release guards (%s); a redelivery will take them over", exc)
