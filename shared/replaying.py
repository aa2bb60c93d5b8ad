"""A replay's taking, judging, sending and recording: each message at most once, never stuck.

Each selected message (``shared.replay_selection``) is taken with one compare-and-set,
``{_id, status: 'is_missed'} -> status 'replaying'`` (or ``'failed'``, with the code and receipt
it had when selected: ``unchanged``) (``shared.store.replays``), so two replays run at the same
time (or one run twice) can never both take a message: the loser's update matches nothing. The
replay is recorded on the message (run, who, when, why, where it came from, the reason it was
missed or failed).

Who sends: the API and the console only take (``ops.replay.queue``) and hand what they took to
the consumers as a replay wake-up; a consumer takes the hold over from the run
(``send_replay``) and sends here, with its Expo sender (its token, its share of the fleet's
rate). ``tzpush replay`` takes and sends in one process (``Replayer.run``).

What was taken is judged at the sending instant (``shared.domain.replay``): a token that died
since, a user who turned the category off, a removed reminder: cancelled with that reason; the
user's quiet hours *now*, in the user's zone: back to ``is_missed`` for a later replay; the daily
cap of the user's local day *now*: reserved as the consumer reserves it, and cancelled when
reached. The rest goes through the Expo sender (no broker), with an attempt record written
before each request, and the outcome is recorded as the consumer records it: ``success`` with
the ticket id and a pending receipt, or ``failed`` with the reason (a failure gives its cap
reservation back); token hygiene through ``shared.store.tokens.token_hygiene``.

Storage is the seam's (``shared.store.abc_replays.ReplayStores``: the replay store, and the
consumer's stores for the current intent, daily caps, tokens and attempt records).

A replay that stops (any error, Ctrl-C, SIGTERM) settles what it still holds before it exits:
what certainly never left goes back to where it came from (``is_missed`` or ``failed``), what
may have left ends ``failed`` "outcome unknown". One killed hard leaves its messages
``replaying`` until its lease runs out; then the next replay (``resume``) or the janitor settles
them by the same rule.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from shared import metrics
from shared.clock import Clock, utcnow
from shared.domain import replay as rules
from shared.domain.messages import Doc, Status
from shared.domain.outcomes import TokenEffect, effect_of, outcome_fields
from shared.domain.plan import to_item
from shared.expo.pushes import OutgoingPush, PushOutcome, Sender
from shared.replay_selection import Selection, unchanged
from shared.settings import Settings
from shared.store import db as dbm
from shared.store import intent as stored_intent
from shared.store import replays
from shared.store.abc_replays import HeldWrite, ReplayStores
from shared.store.mongo import ReplayWhere, replay_stores_of
from shared.store.tokens import token_hygiene
from shared.wire import Item, WakeUp

log = logging.getLogger(__name__)

CHUNK = 500
QUIET = "left is_missed (quiet hours)"
MALFORMED = "left is_missed (malformed document)"
STOPPED = "back to is_missed (replay stopped)"
UNKNOWN = "failed (outcome unknown)"
CANCELLED = Status.CANCELLED


def _malformed(doc: Doc) -> str | None:
    """Why a (hand-edited) document cannot be replayed, or ``None``."""
    try:
        to_item(doc)
        if not isinstance(doc["category"], str) or not isinstance(doc["token"], str):
            raise TypeError("category and token must be strings")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"malformed document, not replayed: {type(exc).__name__} {exc}"
    return None


@dataclass
class Replayer:
    """Takes, judges, sends and records; ``counts`` says what became of each message.
    ``where``: a replay's stores, or a MongoDB database."""

    where: ReplayWhere
    settings: Settings
    sender: Sender
    by: str
    reason: str
    clock: Clock = utcnow
    counts: Counter[str] = field(default_factory=Counter)
    run_id: str = ""
    selection: Selection = field(default_factory=Selection)  # what is taken, and from where
    _caps: dict[str, str] = field(default_factory=dict)  # message id -> counter reserved
    _lock: threading.Lock = field(default_factory=threading.Lock)
    stores: ReplayStores = field(init=False)

    def __post_init__(self) -> None:
        self.stores = replay_stores_of(self.where)
        self.run_id = self.run_id or replays.new_run(self.by)

    @property
    def origin(self) -> Status:
        """Where what this replay takes comes from, and goes back to if it is not sent."""
        return self.selection.status

    def _left(self, why: str) -> str:
        """A count's key for messages given back (``left is_missed (quiet hours)``...)."""
        return why.replace(Status.IS_MISSED.value, self.origin.value)

    def run(
        self,
        docs: list[Doc],
        progress: Callable[[int], None] | None = None,
        *,
        taken: bool = False,
    ) -> Counter[str]:
        """Take (unless ``taken``: this replay already holds them), judge and send ``docs`` in
        chunks; on any error (Ctrl-C too) settle what is held, re-raise."""
        try:
            for i in range(0, len(docs), CHUNK):
                chunk = docs[i : i + CHUNK]
                self.send_taken(chunk if taken else self.take(chunk))
                if progress is not None:
                    progress(len(chunk))
        except BaseException as exc:
            self._stop(exc)
            raise
        return self.counts

    def _stop(self, error: BaseException) -> None:
        """This run stops: settle what it still holds by the attempt-record rule."""
        try:
            settled = replays.settle(self.stores, self.run_id, self.run_id, self.clock())
            with self._lock:
                refunds = [self._caps.pop(i) for i in settled.missed if i in self._caps]
            self.stores.replays.give_back(refunds)
        except Exception:
            log.exception(
                "replay %s stopped (%r) and could not settle what it holds: the next replay or "
                "the janitor settles it once its lease (%s) has run out",
                self.run_id,
                error,
                replays.LEASE,
            )
            return
        with self._lock:
            self.counts[self._left(STOPPED)] += len(settled.missed)
            self.counts[UNKNOWN] += len(settled.unknown)
        if settled:
            log.warning("replay %s stopped (%r): %s", self.run_id, error, settled.describe())

    def take(self, docs: list[Doc]) -> list[Doc]:
        """Take ``docs`` for this run (compare-and-set each); returns those taken."""
        now = self.clock()
        run = self.run_id
        origin = self.origin
        mine = [
            d
            for d in docs
            if replays.take(
                self.stores.replays,
                d,
                run,
                self.by,
                self.reason,
                now,
                origin=origin,
                also=unchanged(d) if origin is Status.FAILED else None,
            )
        ]
        if len(mine) < len(docs):
            self.counts["skipped (taken by another replay)"] += len(docs) - len(mine)
        return mine

    def send_taken(self, mine: list[Doc]) -> None:
        """Judge, send and record messages this replay holds (``replay.holder`` is its run id)."""
        now = self.clock()
        run = self.run_id
        origin = self.origin
        writes: list[HeldWrite] = []
        tally: Counter[str] = Counter()  # what the writes do, counted once they are done
        cancelled: list[str] = []  # categories, for the metric
        items: dict[str, Item] = {}
        for d in mine:
            bad = _malformed(d)
            if bad:
                writes.append(replays.back_to_missed(d["_id"], run, bad, now, origin))
                tally[self._left(MALFORMED)] += 1
            else:
                items[d["_id"]] = to_item(d)
        by_id = {d["_id"]: d for d in mine}
        consumer = self.stores.consumer
        users, reminders, tokens = (
            stored_intent.current_of(consumer.current, consumer.tokens, list(items.values()))
            if items
            else ({}, {}, {})
        )
        keep: list[Item] = []
        for mid, it in items.items():
            category = by_id[mid]["category"]
            user = users.get(it.user)
            current = (user, reminders.get(it.reminder), tokens.get(it.token_id))
            verdict, why = rules.judge(it, category, current, now)
            if verdict is rules.Verdict.CANCEL:
                writes.append(replays.ended(mid, run, CANCELLED, f"not replayed: {why}", now))
                cancelled.append(category)
            elif verdict is rules.Verdict.LATER:
                why = f"not replayed now: {why}"
                writes.append(replays.back_to_missed(mid, run, why, now, origin))
                tally[self._left(QUIET)] += 1
            else:
                keep.append(rules.at_replay(it, now, (user or {}).get("timezone")))
        caps = {it.id: users[it.user].get("dailyCap") for it in keep}
        over = (
            stored_intent.reserve_caps(consumer.counters, keep, caps) if any(caps.values()) else {}
        )
        for it in keep:
            if it.id in over:
                reason = f"not replayed: {over[it.id]}"
                writes.append(replays.ended(it.id, run, CANCELLED, reason, now))
                cancelled.append(by_id[it.id]["category"])
            elif caps.get(it.id):
                self._caps[it.id] = stored_intent.cap_key(it.user, it.local_date)
        if writes:
            with dbm.translate_errors("recording what the replay does not send"):
                self.stores.replays.write(writes)
        tally[CANCELLED] += len(cancelled)
        self.counts.update(+tally)
        for category in cancelled:
            metrics.MESSAGES.labels(category, CANCELLED).inc()
        sendable = {it.id: by_id[it.id] for it in keep if it.id not in over}
        if not sendable:
            return
        pushes = [
            OutgoingPush(
                d["_id"],
                d["token"],
                d.get("title"),
                d.get("body"),
                {
                    **(d.get("data") or {}),
                    "messageId": d["_id"],
                    "category": d["category"],
                    "label": d.get("label", ""),
                    "replayed": True,
                },
            )
            for d in sendable.values()
        ]
        self.sender.send(
            pushes,
            on_chunk_done=lambda outs: self._record(sendable, outs),
            before_request=lambda ids: replays.leaving(self.stores, run, ids, self.clock()),
        )
        # Every outcome of this chunk is recorded: nothing of it is "may have left" any more.
        replays.forget_attempts(self.stores.replays, run)

    def _record(self, docs: dict[str, Doc], outs: list[PushOutcome]) -> None:
        now = self.clock()
        updates: list[HeldWrite] = []
        effects: list[TokenEffect] = []
        refunds: list[str] = []
        for o in outs:
            d = docs[o.message_id]
            fields = outcome_fields(
                ok=o.ok,
                at=now,
                due_ms=int(d["scheduledAt"].timestamp() * 1000),
                ticket=o.ticket_id,
                error=o.error,
                message=o.message,
                receipts_delay_s=self.settings.outcomes.receipts_delay_s,
                code=o.code,
            )
            if o.ok:
                fields["reason"] = f"accepted by Expo (replayed by {self.by})"
            token, user = d["notificationTokenId"], d["userId"]
            effect = effect_of(o.ok, o.code, o.error, token, user, now, d["_id"])
            if effect is not None:
                effects.append(effect)
            fields["replay.sentAt"] = now
            # What the message said before (a failure's code, an earlier ticket and receipt)
            # is not this outcome's: a success has no error, a failure no ticket.
            stale = ("error", "errorCode") if o.ok else ("ticketId", "sentAt", "receipt")
            updates.append(HeldWrite(o.message_id, self.run_id, fields, stale, o.attempts))
            with self._lock:
                key = self._caps.pop(o.message_id, None)
                if key is not None and not o.ok:
                    refunds.append(key)  # a failed push gives its cap reservation back
                self.counts[fields["status"]] += 1
            metrics.MESSAGES.labels(d["category"], fields["status"]).inc()
        consumer = self.stores.consumer
        with dbm.translate_errors("recording replay outcomes"):
            self.stores.replays.write(updates)
            self.stores.replays.give_back(refunds)
            token_hygiene(
                consumer.tokens,
                consumer.changes,
                effects,
                self.settings.outcomes.max_token_failures,
                now,
            )


def send_replay(
    where: ReplayWhere,
    settings: Settings,
    sender: Sender,
    wake: WakeUp,
    sender_id: str,
    clock: Clock = utcnow,
) -> Counter[str]:
    """Send a replay's wake-up as ``sender_id`` (a consumer): take the hold of its messages over
    from the replay run that took them (``replays.hand_over``: a second copy of the wake-up, or
    a run settled meanwhile, gets nothing), then judge, send and record them as the run would.
    Returns what became of them; a stop settles what is held (``Replayer.run``). ``where``: a
    replay's stores, or a MongoDB database."""
    if wake.replay is None:
        raise ValueError(f"wake-up {wake.id} is not a replay's")
    holder = f"{wake.replay}>{sender_id}:{uuid.uuid4().hex[:8]}"
    ids = [i.id for i in wake.items]
    stores = replay_stores_of(where)
    docs = replays.hand_over(stores.replays, wake.replay, ids, holder, clock())
    if not docs:
        return Counter()
    rec = docs[0].get("replay") or {}
    origin = Status.FAILED if rec.get("from") == Status.FAILED.value else Status.IS_MISSED
    replayer = Replayer(
        stores,
        settings,
        sender,
        str(rec.get("by") or "replay"),
        str(rec.get("reason") or ""),
        clock=clock,
        run_id=holder,
        selection=Selection(status=origin),
    )
    docs.sort(key=lambda d: (d["scheduledAt"], d["_id"]))
    return replayer.run(docs, taken=True)
