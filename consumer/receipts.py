"""The receipts poller: what Expo finally did with each accepted push.

Tickets older than ``consumer.receipts_delay_s`` (default 15 min, as Expo advises) are checked in
batches of at most 1000 ids. An ok receipt is recorded; an error receipt turns the message
``failed`` with the receipt's reason; ``DeviceNotRegistered`` deactivates the token at once and
other errors count against it; a ticket with no receipt after ``receipts_give_up_s`` (24 h, as long
as Expo keeps receipts) is recorded as receipt-unknown. Runs as its own service
(``tzpush receipts``) so it scales and fails apart from the senders.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections import Counter

from pymongo import UpdateOne
from pymongo.database import Database

from shared import metrics
from shared.clock import Clock, utcnow
from shared.domain.messages import Doc, Status
from shared.domain.outcomes import TokenEffect, effect_of
from shared.errors import TransientError
from shared.expo.sender import ExpoSender
from shared.settings import Settings
from shared.store import db as dbm
from shared.store.tokens import apply_token_effects

log = logging.getLogger(__name__)

BATCH = 1000


class ReceiptPoller:
    def __init__(
        self, settings: Settings, database: Database[Doc], sender: ExpoSender, clock: Clock = utcnow
    ) -> None:
        self.settings = settings
        self.db = database
        self.sender = sender
        self.clock = clock

    def poll_once(self, *, limit: int = 20000) -> Counter[str]:
        """Check every due ticket (up to ``limit``); return counts by outcome."""
        counts: Counter[str] = Counter()
        now = self.clock()
        with dbm.translate_errors("reading due receipts"):
            due = list(
                self.db[dbm.MESSAGES]
                .find(
                    {"receipt.state": "pending", "receipt.checkAfter": {"$lte": now}},
                    {"ticketId": 1, "notificationTokenId": 1, "userId": 1, "sentAt": 1},
                )
                .limit(limit)
            )
        for i in range(0, len(due), BATCH):
            self._batch(due[i : i + BATCH], now, counts)
        return counts

    def _batch(self, docs: list[Doc], now: dt.datetime, counts: Counter[str]) -> None:
        receipts = self.sender.get_receipts([d["ticketId"] for d in docs if d.get("ticketId")])
        give_up = dt.timedelta(seconds=self.settings.consumer.receipts_give_up_s)
        retry_at = now + dt.timedelta(seconds=self.settings.consumer.receipts_interval_s)
        updates: list[UpdateOne] = []
        effects: list[TokenEffect] = []
        for d in docs:
            r = receipts.get(d.get("ticketId", ""))
            if r is None:
                if d.get("sentAt") is None or now - d["sentAt"] > give_up:
                    updates.append(
                        UpdateOne(
                            {"_id": d["_id"]},
                            {
                                "$set": {
                                    "receipt.state": "unknown",
                                    "receipt.checkedAt": now,
                                    "receipt.reason": "no receipt from Expo within 24 h",
                                }
                            },
                        )
                    )
                    counts["unknown"] += 1
                else:
                    updates.append(
                        UpdateOne({"_id": d["_id"]}, {"$set": {"receipt.checkAfter": retry_at}})
                    )
                    counts["not_ready"] += 1
                continue
            token, user = d["notificationTokenId"], d["userId"]
            effect = effect_of(r.ok, r.code, r.error, token, user, d.get("sentAt"), d["_id"])
            if effect is not None:
                effects.append(effect)
            if r.ok:
                updates.append(
                    UpdateOne(
                        {"_id": d["_id"]},
                        {"$set": {"receipt.state": "ok", "receipt.checkedAt": now}},
                    )
                )
                counts["ok"] += 1
            else:
                reason = f"receipt error {r.error}: {r.message}".strip()
                updates.append(
                    UpdateOne(
                        {"_id": d["_id"]},
                        {
                            "$set": {
                                "status": Status.FAILED.value,
                                "reason": reason,
                                "receipt.state": "error",
                                "receipt.error": r.error,
                                "receipt.checkedAt": now,
                            }
                        },
                    )
                )
                counts[f"error:{r.error}"] += 1
            metrics.RECEIPTS.labels("ok" if r.ok else (r.error or "error")).inc()
        with dbm.translate_errors("recording receipts"):
            if updates:
                self.db[dbm.MESSAGES].bulk_write(updates, ordered=False)
            apply_token_effects(self.db, effects, self.settings.consumer.max_token_failures, now)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                counts = self.poll_once()
                if counts:
                    log.info("receipts: %s", dict(counts))
            except TransientError as exc:
                log.warning("receipt poll failed, retried next time: %s", exc)
            except Exception:
                log.exception("receipt poll failed")
            stop.wait(self.settings.consumer.receipts_interval_s)
