"""Device registrations: one active registration per device id and per token string.

An Expo token belongs to an app install, not to a person: when another user logs in on the
install (same device id, or the same token string under another id), every other registration
of that device or token string is deactivated, and each user who lost one is stamped in the
intent-change log. That stamp is what makes a consumer recheck that user's pending messages in
full at send time, where an inactive token ends them ``cancelled`` with the deactivation reason.
Every deactivation passes what it turned off through ``stamped``, so no path can turn a token
off silently. The registrations themselves are read and written through the storage seam
(``RegistrationStore`` in ``shared.store.abc_registrations``; ``TokenStore`` for the consumer).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection

from pymongo.database import Database

from shared import metrics
from shared.domain.messages import Doc
from shared.domain.outcomes import EffectKind, TokenEffect
from shared.domain.plan import bucket_of
from shared.store.abc import IntentLog, TokenStore
from shared.store.mongo.intent import MongoIntentLog
from shared.store.mongo.tokens import MongoTokens

TOKEN_REPLACED = "token replaced"


def deactivate_tokens(
    tokens: TokenStore, log: IntentLog, token_ids: Collection[str], reason: str, now: dt.datetime
) -> list[Doc]:
    """Deactivate the active ones of ``token_ids``; stamp their users in the change log;
    return the registrations this call turned off (``_id`` and ``userId``)."""
    return stamped(log, tokens.deactivate(token_ids, reason, now), now)


def stamped(log: IntentLog, off: list[Doc], now: dt.datetime) -> list[Doc]:
    """``off``, registrations a deactivation just turned off, once their users are stamped in
    the change log (consumers recheck those users' pending messages in full)."""
    # A registration written by hand without its user has no one to stamp.
    users = {u for t in off if isinstance(u := t.get("userId"), str)}
    if users:
        log.record(users, now)
    return off


def holds(doc: Doc, device: str, token: str) -> bool:
    """Whether a stored registration holds this device id or this token string."""
    return doc.get("deviceId") == device or doc.get("token") == token


def same_login(doc: Doc, user_id: str, device: str, token: str) -> bool:
    """Whether a stored registration is this very login: its user, device id and token string.
    One written by hand without one of them is not: it is another holder, replaced."""
    return (doc.get("userId"), doc.get("deviceId"), doc.get("token")) == (user_id, device, token)


def new_registration(user_id: str, device: str, token: str, now: dt.datetime) -> Doc:
    """A new active registration of this login, under a random ``_id``, not yet stored."""
    return {
        "_id": uuid.uuid4().hex[:16],
        "userId": user_id,
        "bucket": bucket_of(user_id),  # the planner reads a range of buckets at a time
        "deviceId": device,
        "token": token,
        "isActive": True,
        "failureCount": 0,
        "createdAt": now,
        "updatedAt": now,
    }


def apply_token_effects(
    database: Database[Doc], effects: list[TokenEffect], max_failures: int, now: dt.datetime
) -> None:
    """``token_hygiene`` on MongoDB."""
    token_hygiene(MongoTokens(database), MongoIntentLog(database), effects, max_failures, now)


def token_hygiene(
    tokens: TokenStore,
    log: IntentLog,
    effects: list[TokenEffect],
    max_failures: int,
    now: dt.datetime,
) -> None:
    """Token hygiene: dead tokens off at once, N failures in a row off, a success resets.

    "In a row" is by push instant, whatever order the outcomes arrive in: a failure counts only
    if no success pushed after it has reset the count (``failureResetAt``), and a success resets
    only if no failure pushed after it has been counted (``lastFailureAt``). A late receipt for
    an old push therefore cannot wipe out newer failures, nor an old failure add to a newer run.

    Applying the same effects again changes nothing (a journal merged twice, or by two mergers
    at once): a failure that names its message counts once (``TokenStore.count_failure``), and
    a failure already counted still checks the deactivation, which a merge that stopped
    part-way may not have made.
    """
    ordered = sorted(effects, key=lambda e: e.pushed_at or now)
    failing: set[str] | None = None  # tokens with failures, looked up once if a success needs it
    for e in ordered:
        at = e.pushed_at or now
        if e.kind == EffectKind.DEAD:
            reason = e.reason or "DeviceNotRegistered"
            if deactivate_tokens(tokens, log, [e.token_id], reason, now):
                metrics.TOKENS_DEACTIVATED.labels("DeviceNotRegistered").inc()
        elif e.kind == EffectKind.FAIL:
            doc = tokens.count_failure(e.token_id, at, e.message_id, now)
            if doc is None:
                continue  # a success pushed later already reset the run this belonged to
            if failing is not None:
                failing.add(e.token_id)
            if doc.get("isActive") and int(doc.get("failureCount", 0)) >= max_failures:
                reason = f"{max_failures} consecutive failures (last: {e.reason})"
                if deactivate_tokens(tokens, log, [e.token_id], reason, now):
                    metrics.TOKENS_DEACTIVATED.labels("consecutive_failures").inc()
        elif e.kind == EffectKind.OK:
            if failing is None:
                failing = tokens.failing()
            if e.token_id not in failing:
                continue
            if tokens.reset_failures(e.token_id, at, now):
                failing.discard(e.token_id)
