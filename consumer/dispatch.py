"""Dispatch: at each due instant, recheck, reserve caps, send, and hand outcomes to the recorder.

A due group's last check (intent changes of the last second, the daily cap) runs just before
its requests; each request's ids are recorded as possibly sent right before it leaves
(``consumer.attempts``), and each request's outcomes go to the recorder as soon as it returns
(journaled at once, merged later: ``consumer.recorder``).
"""

from __future__ import annotations

import logging
from typing import Any

from pymongo.errors import PyMongoError

from consumer.core import Batch, ConsumerCore
from consumer.recorder import Job
from shared import metrics
from shared.domain.messages import Status
from shared.domain.outcomes import journal_row
from shared.errors import TransientError
from shared.expo.pushes import PushOutcome
from shared.store import db as dbm
from shared.wire import Item

log = logging.getLogger("consumer.worker")


class Dispatching(ConsumerCore):
    """The sending job of ``consumer.worker.Consumer``."""

    def _send(self, key: str, batch: Batch, items: list[Item]) -> None:
        if batch.released:
            return
        w = batch.wake
        now = self.clock()
        try:
            with dbm.translate_errors("final check before sending"):
                changed = self._recent_changes()
                ends, keep = self._judge(w, items, now, changed & {i.user for i in items})
                self._finish(key, batch, ends)
                if not keep:
                    return
        except (TransientError, PyMongoError) as exc:
            # Nothing has left yet: put the items back so a redelivery can take them.
            log.warning("final check for %s failed (%s); releasing it", w.id, exc)
            self._release(batch, items)
            return
        metrics.HELD.dec(len(items))
        with self._lock:
            self._in_flight.update(i.id for i in keep)
        by_id = {i.id: i for i in keep}
        pushes = [batch.prepared.get(i.id) or self._push_of(w, i) for i in keep]
        started_ms = self._now_ms()
        lateness = metrics.LATENESS.labels(w.category)
        for i in keep:
            lateness.observe(max(0, started_ms - i.due_ms) / 1000)
        try:
            # Each request's ids are recorded just before it goes out (group-committed: see
            # consumer/attempts.py), so a crash leaves only the requests in flight with an
            # unknown outcome; the records are released once the group's outcomes are journaled.
            marker = f"{self.cid}:{min(by_id)}"
            self.sender.send(
                pushes,
                on_chunk_done=lambda outs: self._record(key, batch, by_id, outs),
                before_request=lambda ids: self._attempts.mark(marker, ids),
            )
            # Queued behind the group's journal writes: once those are in, the record goes.
            self._recorder.put(Job(marker=marker))
        finally:
            with self._lock:
                self._in_flight.difference_update(by_id)

    def _record(
        self, key: str, batch: Batch, by_id: dict[str, Item], outs: list[PushOutcome]
    ) -> None:
        """Hand one request's outcomes to the recorder: journaled at once, merged later."""
        now = self.clock()
        w = batch.wake
        rows: list[list[Any]] = []
        for o in outs:
            it = by_id[o.message_id]
            code = o.code.value if o.code else None
            result = {"id": it.id, "ok": o.ok, "ticket": o.ticket_id, "code": code}
            said = {"error": o.error, "message": o.message, "attempts": o.attempts}
            pushed = {"token": it.token_id, "user": it.user, "cap": bool(it.cap)}
            rows.append(journal_row(**result, **said, **pushed, ld=it.local_date, due=it.due_ms))
        outcomes = [(w.category, Status.SUCCESS if o.ok else Status.FAILED) for o in outs]
        ids = [o.message_id for o in outs]
        self._recorder.put(
            Job(
                outcomes=outcomes,
                journal=rows,
                journal_at=now,
                done=lambda: self._close_ids(key, batch, ids),
            )
        )
