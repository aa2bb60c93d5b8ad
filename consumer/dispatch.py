"""Dispatch: at each due instant, recheck, reserve caps, send, and hand outcomes to the recorder.

A due group's last check (intent changes of the last second, the daily cap) runs just before
its requests; each request's ids are recorded as possibly sent right before it leaves
(``consumer.attempts``), and each request's outcomes go to the recorder as soon as it returns
(journaled at once, merged later: ``consumer.recorder``).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from consumer.attempts import AttemptLog
from consumer.checks import IntentCheck
from consumer.judge import End
from consumer.recorder import Job, Recorder
from consumer.recording import Recording
from consumer.state import Batch, Held, push_of
from shared import metrics
from shared.clock import Clock, ms_of
from shared.domain.backoff import compute_backoff
from shared.domain.messages import Status
from shared.domain.outcomes import journal_row
from shared.errors import TransientError
from shared.expo.pushes import PushOutcome, Sender
from shared.settings import Settings
from shared.store import db as dbm
from shared.store.guards import Fenced
from shared.store.mongo import StoreError
from shared.wire import Item

log = logging.getLogger("consumer.worker")


class GivenBack(Exception):
    """The wake-up was given back (lost broker, shutdown) before this request could leave."""


class Dispatch:
    def __init__(
        self,
        settings: Settings,
        sender: Sender,
        *,
        cid: str,
        clock: Clock,
        held: Held,
        checks: IntentCheck,
        recording: Recording,
        recorder: Recorder,
        attempts: AttemptLog,
        on_fenced: Callable[[Exception], None],
        rng: random.Random,
    ) -> None:
        self.settings = settings
        self.sender = sender
        self.cid = cid
        self.clock = clock
        self.held = held
        self.checks = checks
        self.recording = recording
        self.recorder = recorder
        self.attempts = attempts
        self.on_fenced = on_fenced
        self.rng = rng

    def send(self, key: str, batch: Batch, items: list[Item]) -> None:
        """One due group at its instant: claim, last check, send, hand outcomes over.

        From the claim on, these items may leave: only this due group releases their guards,
        and only for what it certainly did not send (see ``Recording.release``).
        """
        with batch.lock:
            if batch.released:
                return
            batch.claimed.update(i.id for i in items)
        w = batch.wake
        try:
            checked = self.final_check(batch, items)
        except Exception:
            # A bug, not the database: nothing of this group left. Its guards are released
            # and the wake-up is parked for a person; what stays pending the janitor ends.
            log.exception("bug in the final check of wake-up %s; dead-lettering it", w.id)
            self.recording.unclaim(batch, items)
            with batch.lock:
                batch.released = True
            self.recording.dead_letter_batch(key, batch, "consumer error in the final check")
            return
        if checked is None:  # given back while the database was away: nothing left
            self.recording.unclaim(batch, items)
            return
        ends, keep = checked
        self.recording.finish(key, batch, ends)
        metrics.HELD.dec(len(items))
        if not keep:
            return
        with batch.lock:
            gone = batch.released
        if gone:  # the broker took the frame back during the check: nothing of it leaves
            self.recording.unclaim(batch, keep)
            return
        by_id = {i.id: i for i in keep}
        self.held.start_sending(set(by_id))
        pushes = [batch.prepared.get(i.id) or push_of(w, i) for i in keep]
        started_ms = ms_of(self.clock)
        lateness = metrics.LATENESS.labels(w.category)
        late_ms = [max(0, started_ms - i.due_ms) for i in keep]
        for ms in late_ms:
            lateness.observe(ms / 1000)
        answered: set[str] = set()

        def on_chunk_done(outs: list[PushOutcome]) -> None:
            answered.update(o.message_id for o in outs)
            self._record(key, batch, by_id, outs)

        # Each request's ids are recorded just before it goes out (group-committed: see
        # consumer/attempts.py), so a crash leaves only the requests in flight with an unknown
        # outcome; the records are released once the group's outcomes are journaled.
        marker = f"{self.cid}:{min(by_id)}"
        try:
            # A push Expo throttles for its device is sent again while it is still useful:
            # until the grace window of the group's due instant ends.
            grace_left_s = (
                self.settings.grace_seconds(w.category)
                - (ms_of(self.clock) - min(i.due_ms for i in keep)) / 1000
            )
            self.sender.send(
                pushes,
                on_chunk_done=on_chunk_done,
                before_request=lambda ids: self._before_request(batch, marker, ids),
                retry_within_s=max(0.0, grace_left_s),
            )
            log.info(
                "%s: sent %d %s push(es) of wake-up %s, %d to %d ms late",
                self.cid,
                len(answered),
                w.category,
                w.id,
                min(late_ms),
                max(late_ms),
            )
        except (GivenBack, Fenced) as exc:
            # Requests not started never left; the ones started have their outcomes.
            unsent = [i for i in keep if i.id not in answered]
            log.warning("%s: %d of due group %s not sent (%s)", self.cid, len(unsent), w.id, exc)
            self.recording.unclaim(batch, unsent)
            if isinstance(exc, Fenced):
                self.on_fenced(exc)
        finally:
            self.held.stop_sending(set(by_id))
            # Queued behind the group's journal writes: once those are in, the record goes.
            self.recorder.put(Job(marker=marker))

    def _before_request(self, batch: Batch, marker: str, ids: list[str]) -> None:
        """Just before a request leaves: not if the wake-up was given back, not if fenced."""
        with batch.lock:
            if batch.released:
                raise GivenBack(f"wake-up {batch.wake.id} was given back")
        self.attempts.mark(marker, ids)

    def final_check(self, batch: Batch, items: list[Item]) -> tuple[list[End], list[Item]] | None:
        """Intent changes, caps and the grace rule just before sending; a database error is
        retried with back-off (past the grace window the items end ``is_missed`` once the
        database answers). ``None``: the wake-up was given back meanwhile (nothing to send)."""
        w = batch.wake
        attempt = 0
        while True:
            now = self.clock()
            try:
                with dbm.translate_errors("final check before sending"):
                    changed = self.checks.recent_changes()
                    return self.checks.judge(w, items, now, changed & {i.user for i in items})
            except (TransientError, StoreError) as exc:
                with batch.lock:
                    gone = batch.released
                if gone or self.held.closing:
                    return None
                attempt += 1
                delay = compute_backoff(attempt, 0.2, 2.0, self.rng)
                log.warning("final check for %s failed (%s); retry in %.1f s", w.id, exc, delay)
                time.sleep(delay)

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
        self.recorder.put(
            Job(
                outcomes=outcomes,
                journal=rows,
                journal_at=now,
                done=lambda: self.recording.close_ids(key, batch, ids),
            )
        )
