"""``tzpush replay``: send again what was missed, each message at most once, never stuck.

Selection reads ``is_missed`` messages through the partial index ``missed_by_time`` (a due-time
range; category, user and id filters ride on it). With ``--status failed`` it reads messages that
ended ``failed`` for a project-level cause instead (``Selection.causes``, names from
``shared.domain.outcomes.REPLAY_CAUSES``: ``credentials`` and ``expo-down``), by their
``errorCode`` or their receipt's error; never a failure a device caused, the message's own, or
one whose push Expo may already have taken (``OutcomeUnknown``): the failed messages of the range
through the partial index ``failed_by_time``, the cause judged here (``rules.says_a_cause``; an
``$or`` in the query made the server here read every message). Each selected message is taken
with one compare-and-set, ``{_id, status: 'is_missed'} -> status 'replaying'`` (or ``'failed'``,
with the code and receipt it had when selected: ``unchanged``) (``shared.store.replays``), so two
replays run at the same time (or one run twice)
can never both take a message: the loser's update matches nothing. The replay is recorded on the
message (run, who, when, why, where it came from, the reason it was missed or failed).

What was taken is judged at the replay's own instant (``shared.domain.replay``): a token that
died since, a user who turned the category off, a removed reminder: cancelled with that reason;
the user's quiet hours *now*, in the user's zone: back to ``is_missed`` for a later replay; the
daily cap of the user's local day *now*: reserved as the consumer reserves it, and cancelled when
reached. The rest goes straight through the Expo sender (no broker), with an attempt record
written before each request, and the outcome is recorded as the consumer records it:
``success`` with the ticket id and a pending receipt, or ``failed`` with the reason (a failure
gives its cap reservation back); token hygiene through
``shared.store.tokens.apply_token_effects``.

A replay that stops (any error, Ctrl-C, SIGTERM) settles what it still holds before it exits:
what certainly never left goes back to where it came from (``is_missed`` or ``failed``), what
may have left ends ``failed`` "outcome unknown". One killed hard leaves its messages
``replaying`` until its lease runs out; then the next replay (``resume``) or the janitor settles
them by the same rule.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database

from shared import metrics
from shared.clock import Clock, utcnow
from shared.domain import replay as rules
from shared.domain.messages import Doc, Status
from shared.domain.outcomes import REPLAY_CAUSES, ErrorCode, TokenEffect, effect_of, outcome_fields
from shared.domain.plan import to_item
from shared.errors import InputError
from shared.expo.pushes import OutgoingPush, PushOutcome, Sender
from shared.settings import Settings
from shared.store import db as dbm
from shared.store import intent as stored_intent
from shared.store import replays
from shared.store.tokens import apply_token_effects
from shared.wire import Item

log = logging.getLogger(__name__)

CHUNK = 500
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
FAR = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)
QUIET = "left is_missed (quiet hours)"
MALFORMED = "left is_missed (malformed document)"
STOPPED = "back to is_missed (replay stopped)"
REPLAYABLE = (Status.IS_MISSED, Status.FAILED)
UNKNOWN = "failed (outcome unknown)"
CANCELLED = Status.CANCELLED


@dataclass
class Selection:
    """Which messages to replay: ``is_missed`` ones, or (``status=FAILED``) those that failed
    for one of ``causes`` (empty: every cause in ``REPLAY_CAUSES``); empty fields select
    everything."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    categories: Sequence[str] = ()
    users: Sequence[str] = ()
    ids: Sequence[str] = ()
    status: Status = Status.IS_MISSED
    causes: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.status not in REPLAYABLE:
            raise InputError(f"replay selects is_missed or failed messages, not {self.status}")
        if self.causes and self.status is not Status.FAILED:
            raise InputError("a cause selects failed messages: ask for status failed with it")
        bad = [c for c in self.causes if c not in REPLAY_CAUSES]
        if bad:
            raise InputError(
                f"unknown cause {', '.join(map(repr, bad))}: one of {', '.join(REPLAY_CAUSES)}"
            )

    def codes(self) -> list[ErrorCode]:
        """The failure codes a ``failed`` selection takes."""
        return sorted({c for name in self.causes or REPLAY_CAUSES for c in REPLAY_CAUSES[name]})

    def takes(self, doc: Doc) -> bool:
        """Whether a selected message says one of the causes (its code, or its receipt's);
        every ``is_missed`` one does. Judged here, not as an ``$or`` in the query: the server
        here reads every message for one."""
        if self.status is not Status.FAILED:
            return True
        return rules.says_a_cause(doc, {c.value for c in self.codes()})

    def query(self) -> Doc:
        q: Doc = {"status": self.status.value}
        if self.ids:
            q["_id"] = {"$in": list(self.ids)}
        q["scheduledAt"] = {"$gte": self.since or EPOCH, "$lt": self.until or FAR}
        if self.categories:
            q["category"] = {"$in": list(self.categories)}
        if self.users:
            q["userId"] = {"$in": list(self.users)}
        return q


def unchanged(doc: Doc) -> Doc:
    """What a failed message must still say when a replay takes it: the code and the receipt it
    had when selected (so one that changed since is left)."""
    return {"errorCode": doc.get("errorCode"), "receipt": doc.get("receipt")}


def select(database: Database[Doc], selection: Selection) -> list[Doc]:
    """The messages a selection names, oldest due first."""
    cursor = database[dbm.MESSAGES].find(selection.query())
    return sorted(
        (d for d in cursor if selection.takes(d)), key=lambda d: (d["scheduledAt"], d["_id"])
    )


def resume(database: Database[Doc], by: str, clock: Clock = utcnow) -> replays.Settled:
    """Settle replays that stopped without settling (their lease ran out), before selecting:
    what they never sent is ``is_missed`` (or ``failed``) again, so this replay can select it."""
    return replays.settle_stale(database, clock(), f"replay by {by}")


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
    """Takes, judges, sends and records; ``counts`` says what became of each message."""

    database: Database[Doc]
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

    def __post_init__(self) -> None:
        self.run_id = self.run_id or replays.new_run(self.by)

    @property
    def origin(self) -> Status:
        """Where what this replay takes comes from, and goes back to if it is not sent."""
        return self.selection.status

    def _left(self, why: str) -> str:
        """A count's key for messages given back (``left is_missed (quiet hours)``...)."""
        return why.replace(Status.IS_MISSED.value, self.origin.value)

    def run(self, docs: list[Doc], progress: Callable[[int], None] | None = None) -> Counter[str]:
        """Replay ``docs`` in chunks; on any error (Ctrl-C too) settle what is held, re-raise."""
        try:
            for i in range(0, len(docs), CHUNK):
                chunk = docs[i : i + CHUNK]
                self._chunk(chunk)
                if progress is not None:
                    progress(len(chunk))
        except BaseException as exc:
            self._stop(exc)
            raise
        return self.counts

    def _stop(self, error: BaseException) -> None:
        """This run stops: settle what it still holds by the attempt-record rule."""
        try:
            settled = replays.settle(self.database, self.run_id, self.run_id, self.clock())
            with self._lock:
                refunds = [self._caps.pop(i) for i in settled.missed if i in self._caps]
            for key in refunds:
                self.database[dbm.COUNTERS].update_one({"_id": key}, {"$inc": {"count": -1}})
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

    def _chunk(self, docs: list[Doc]) -> None:
        now = self.clock()
        run = self.run_id
        origin = self.origin
        mine = [
            d
            for d in docs
            if replays.take(
                self.database,
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
        writes: list[UpdateOne] = []
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
        users, reminders, tokens = (
            stored_intent.load_current(self.database, list(items.values()))
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
            stored_intent.daily_cap_reasons(self.database, keep, caps) if any(caps.values()) else {}
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
                self.database[dbm.MESSAGES].bulk_write(writes, ordered=False)
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
            before_request=lambda ids: replays.leaving(self.database, run, ids, self.clock()),
        )
        # Every outcome of this chunk is recorded: nothing of it is "may have left" any more.
        replays.forget_attempts(self.database, run)

    def _record(self, docs: dict[str, Doc], outs: list[PushOutcome]) -> None:
        now = self.clock()
        updates: list[UpdateOne] = []
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
            updates.append(
                UpdateOne(
                    replays.held(o.message_id, self.run_id),
                    {
                        "$set": fields,
                        "$unset": dict.fromkeys(stale, ""),
                        "$inc": {"attempts": o.attempts},
                    },
                )
            )
            with self._lock:
                key = self._caps.pop(o.message_id, None)
                if key is not None and not o.ok:
                    refunds.append(key)  # a failed push gives its cap reservation back
                self.counts[fields["status"]] += 1
            metrics.MESSAGES.labels(d["category"], fields["status"]).inc()
        with dbm.translate_errors("recording replay outcomes"):
            self.database[dbm.MESSAGES].bulk_write(updates, ordered=False)
            for key in refunds:
                self.database[dbm.COUNTERS].update_one({"_id": key}, {"$inc": {"count": -1}})
            apply_token_effects(
                self.database, effects, self.settings.outcomes.max_token_failures, now
            )


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises ``SystemExit`` (so ``finally`` and settling run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
