"""The receipts poller: what Expo finally did with each accepted push.

Tickets older than ``outcomes.receipts_delay_s`` (default 15 min, as Expo advises) are checked in
batches of at most 1000 ids. An ok receipt is recorded; an error receipt turns the message
``failed`` with the receipt's reason; ``DeviceNotRegistered`` deactivates the token at once and
other errors count against it; a ticket with no receipt after ``receipts_give_up_s`` (24 h, as long
as Expo keeps receipts) is recorded as receipt-unknown. Runs as its own service
(``tzpush receipts``) so it scales and fails apart from the senders.

One bad message never blocks the others. A message whose fields cannot be used (no ticket id,
no token id: ``shared.domain.validation.receipt_problem``) is set aside (receipt ``unknown``
with the problem as its reason, a log line, ``tzpush_bad_documents_total``) before anything is
asked. A chunk Expo refuses (a 4xx) is looked at more closely: if Expo refuses even a request
that names no ticket of ours, the project's access is at fault (token, URL) and the poll fails
as a whole, blaming no ticket; otherwise the chunk is split in halves until the refused tickets
are alone, and only those are set aside (``refused``). So a poisoned chunk costs about
``2 log2(1000)`` requests once, not every later poll.
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
from shared.domain.validation import BadDocument, doc_id, receipt_problem
from shared.errors import PermanentError, TransientError
from shared.expo.pushes import ReceiptOutcome
from shared.expo.sender import ExpoSender
from shared.settings import Settings
from shared.store import db as dbm
from shared.store.tokens import apply_token_effects

log = logging.getLogger(__name__)

BATCH = 1000
# A ticket id no chunk can be refused for: asked alone when Expo refuses a chunk, to tell a
# refused project (access token, URL) from a refused ticket (as `tzpush doctor` asks).
PROBE_TICKET = "00000000-0000-0000-0000-000000000000"


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
        good: list[Doc] = []
        bad: list[tuple[Doc, str]] = []
        for d in due:
            problem = receipt_problem(d)
            if problem is None:
                good.append(d)
            else:
                bad.append((d, problem))
        if bad:
            self._set_aside(bad, now, counts, "bad_document")
        for i in range(0, len(good), BATCH):
            self._batch(good[i : i + BATCH], now, counts)
        return counts

    def _set_aside(
        self, docs: list[tuple[Doc, str]], now: dt.datetime, counts: Counter[str], what: str
    ) -> None:
        """Record that no receipt will be asked for these messages, with why, and report them."""
        updates = []
        for d, problem in docs:
            metrics.bad_document(log, "receipts", BadDocument("message", doc_id(d), problem))
            reason = f"bad document: {problem}" if what == "bad_document" else problem
            updates.append(_no_receipt(d["_id"], now, reason))
            counts[what] += 1
        with dbm.translate_errors("setting receipts aside"):
            dbm.critical(self.db, dbm.MESSAGES).bulk_write(updates, ordered=False)

    def _ask(
        self, docs: list[Doc], now: dt.datetime, counts: Counter[str], *, probed: bool = False
    ) -> dict[str, ReceiptOutcome] | None:
        """Expo's receipts for ``docs``; ``None`` when Expo refused the chunk and its parts were
        handled apart (see the module's docstring)."""
        try:
            return self.sender.get_receipts([d["ticketId"] for d in docs])
        except PermanentError as exc:
            if not probed and not self._accepts_requests():
                raise  # the project is refused, not a ticket: fail the poll, blame nothing
            if len(docs) == 1:
                why = f"Expo refused the receipt request for this ticket: {exc}"
                self._set_aside([(docs[0], why)], now, counts, "refused")
                return None
            half = len(docs) // 2
            for part in (docs[:half], docs[half:]):
                self._batch(part, now, counts, probed=True)
            return None

    def _accepts_requests(self) -> bool:
        try:
            self.sender.get_receipts([PROBE_TICKET])
        except PermanentError:
            return False
        return True

    def _batch(
        self, docs: list[Doc], now: dt.datetime, counts: Counter[str], *, probed: bool = False
    ) -> None:
        receipts = self._ask(docs, now, counts, probed=probed)
        if receipts is None:
            return
        give_up = dt.timedelta(seconds=self.settings.consumer.receipts_give_up_s)
        retry_at = now + dt.timedelta(seconds=self.settings.consumer.receipts_interval_s)
        updates: list[UpdateOne] = []
        effects: list[TokenEffect] = []
        for d in docs:
            r = receipts.get(d["ticketId"])
            if r is None:
                if d.get("sentAt") is None or now - d["sentAt"] > give_up:
                    updates.append(_no_receipt(d["_id"], now, "no receipt from Expo within 24 h"))
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
            # The code, not the text Expo sent: a label from a fixed set (ErrorCode).
            metrics.RECEIPTS.labels("ok" if r.ok or r.code is None else r.code.value).inc()
        with dbm.translate_errors("recording receipts"):
            if updates:
                dbm.critical(self.db, dbm.MESSAGES).bulk_write(updates, ordered=False)
            apply_token_effects(self.db, effects, self.settings.outcomes.max_token_failures, now)

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


def _no_receipt(message_id: str, now: dt.datetime, reason: str) -> UpdateOne:
    """The write recording that no receipt will be known for this message, and why."""
    return UpdateOne(
        {"_id": message_id},
        {"$set": {"receipt.state": "unknown", "receipt.checkedAt": now, "receipt.reason": reason}},
    )
