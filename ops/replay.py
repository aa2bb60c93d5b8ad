"""``tzpush replay``: send again what was missed, each message at most once.

Selection reads ``is_missed`` messages through the partial index ``missed_by_time`` (a due-time
range; category, user and id filters ride on it). Each selected message is taken with one
compare-and-set, ``{_id, status: 'is_missed'} -> status 'replaying'``, so two replays run at the
same time (or one run twice) can never both take a message: the loser's update matches nothing.
The replay is recorded on the message (who, when, why, the reason it was missed).

What was taken is rechecked against the current user, reminder and token (a token that died since,
a user who turned the category off, a removed reminder: the message is cancelled with that
reason), then sent straight through ``ExpoSender`` (no broker), and the outcome is recorded as
the consumer records it: ``success`` with the ticket id and a pending receipt, or ``failed`` with
the reason; token hygiene through ``consumer.recorder.apply_token_effects``.

A replay that dies between taking and recording leaves messages in ``replaying``; ``tzpush
stats`` shows them and ``tzpush messages show`` says who took them. They are never re-sent
automatically, since their push may have left.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pymongo import UpdateOne
from pymongo.database import Database

from shared import metrics
from shared.clock import Clock, utcnow
from shared.domain import intent
from shared.domain.messages import Doc, Status
from shared.domain.outcomes import TokenEffect, effect_of, outcome_fields
from shared.domain.plan import to_item
from shared.expo.pushes import OutgoingPush, PushOutcome
from shared.expo.sender import ExpoSender
from shared.settings import Settings
from shared.store import db as dbm
from shared.store import intent as stored_intent
from shared.store.journal import apply_token_effects
from shared.store.messages import end

CHUNK = 500
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
FAR = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)


@dataclass
class Selection:
    """Which missed messages to replay; empty fields select everything."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    categories: Sequence[str] = ()
    users: Sequence[str] = ()
    ids: Sequence[str] = ()

    def query(self) -> Doc:
        q: Doc = {"status": Status.IS_MISSED.value}
        if self.ids:
            q["_id"] = {"$in": list(self.ids)}
        q["scheduledAt"] = {"$gte": self.since or EPOCH, "$lt": self.until or FAR}
        if self.categories:
            q["category"] = {"$in": list(self.categories)}
        if self.users:
            q["userId"] = {"$in": list(self.users)}
        return q


def select(database: Database[Doc], selection: Selection) -> list[Doc]:
    """The missed messages a selection names, oldest due first."""
    cursor = database[dbm.MESSAGES].find(selection.query())
    return sorted(cursor, key=lambda d: (d["scheduledAt"], d["_id"]))


@dataclass
class Replayer:
    """Takes, rechecks, sends and records; ``counts`` says what became of each message."""

    database: Database[Doc]
    settings: Settings
    sender: ExpoSender
    by: str
    reason: str
    clock: Clock = utcnow
    counts: Counter[str] = field(default_factory=Counter)

    def run(self, docs: list[Doc], progress: Callable[[int], None] | None = None) -> Counter[str]:
        for i in range(0, len(docs), CHUNK):
            chunk = docs[i : i + CHUNK]
            self._chunk(chunk)
            if progress is not None:
                progress(len(chunk))
        return self.counts

    def _take(self, doc: Doc, now: dt.datetime) -> bool:
        res = self.database[dbm.MESSAGES].update_one(
            {"_id": doc["_id"], "status": Status.IS_MISSED.value},
            {
                "$set": {
                    "status": Status.REPLAYING.value,
                    "replay": {
                        "by": self.by,
                        "at": now,
                        "reason": self.reason,
                        "missedReason": doc.get("reason"),
                    },
                }
            },
        )
        return res.modified_count == 1

    def _chunk(self, docs: list[Doc]) -> None:
        now = self.clock()
        mine = [d for d in docs if self._take(d, now)]
        if len(mine) < len(docs):
            self.counts["skipped (taken by another replay)"] += len(docs) - len(mine)
        items = [to_item(d) for d in mine]
        users, reminders, tokens = (
            stored_intent.load_current(self.database, items) if items else ({}, {}, {})
        )
        sendable: dict[str, Doc] = {}
        ends: list[UpdateOne] = []
        for d, it in zip(mine, items, strict=True):
            why = intent.full_reason(
                it,
                d["category"],
                users.get(it.user),
                reminders.get(it.reminder),
                tokens.get(it.token_id),
            )
            if why:
                reason = f"not replayed: {why}"
                ends.append(end(d["_id"], Status.CANCELLED, reason, now, expect=Status.REPLAYING))
                self.counts[Status.CANCELLED] += 1
                metrics.MESSAGES.labels(d["category"], Status.CANCELLED).inc()
            else:
                sendable[d["_id"]] = d
        if ends:
            self.database[dbm.MESSAGES].bulk_write(ends, ordered=False)
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
        self.sender.send(pushes, on_chunk_done=lambda outs: self._record(sendable, outs))

    def _record(self, docs: dict[str, Doc], outs: list[PushOutcome]) -> None:
        now = self.clock()
        updates: list[UpdateOne] = []
        effects: list[TokenEffect] = []
        for o in outs:
            d = docs[o.message_id]
            fields = outcome_fields(
                ok=o.ok,
                at=now,
                due_ms=int(d["scheduledAt"].timestamp() * 1000),
                ticket=o.ticket_id,
                error=o.error,
                message=o.message,
                receipts_delay_s=self.settings.consumer.receipts_delay_s,
            )
            if o.ok:
                fields["reason"] = f"accepted by Expo (replayed by {self.by})"
            effect = effect_of(o.ok, o.code, o.error, d["notificationTokenId"], d["userId"], now)
            if effect is not None:
                effects.append(effect)
            fields["replay.sentAt"] = now
            updates.append(
                UpdateOne(
                    {"_id": o.message_id, "status": Status.REPLAYING.value},
                    {"$set": fields, "$inc": {"attempts": o.attempts}},
                )
            )
            self.counts[fields["status"]] += 1
            metrics.MESSAGES.labels(d["category"], fields["status"]).inc()
        with dbm.translate_errors("recording replay outcomes"):
            self.database[dbm.MESSAGES].bulk_write(updates, ordered=False)
            apply_token_effects(
                self.database, effects, self.settings.consumer.max_token_failures, now
            )
