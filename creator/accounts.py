"""A user's devices and the user as a whole: a logout, and erasure.

Used by ``tzpush tokens logout``, ``tzpush users erase`` and the HTTP API (``DELETE
/v1/users/{userId}/devices/{deviceId}``, ``DELETE /v1/users/{userId}``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from creator.manage import Manager
from shared.domain.validation import validate_id
from shared.store import db as dbm
from shared.store import erasure, tokens
from shared.store.intent import erase_counters, record_changes

log = logging.getLogger(__name__)

ERASED = erasure.ERASED


@dataclass(frozen=True)
class Erased:
    cancelled: int
    tokens: int
    reminders: int
    history: int


def logout(m: Manager, user_id: str, device_id: str) -> int:
    """Deactivate this user's registration of the device (if it still has one): only theirs, so
    a late logout of a previous user never logs out whoever holds the install now."""
    m.get_user(user_id)
    validate_id(device_id, "device id")
    flt = {"userId": user_id, "deviceId": device_id}
    return len(tokens.deactivate(m.db, flt, "unregistered (logout)", m.now))


def erase_user(m: Manager, user_id: str) -> Erased:
    """Erase a user: nothing more is sent to them, and nothing personal is left.

    In this order, so a consumer judging the user meanwhile finds them gone: stamp the
    change log (consumers recheck in full: "user no longer exists"), delete the user,
    deactivate then delete their device registrations, delete their reminders, end their
    pending and missed messages ``cancelled`` "user erased" (nothing pending stays, nothing
    missed can be replayed), delete their daily-cap counters and their Idempotency-Key records
    (stored answers with their texts). The change log keeps the bare user id with its erasure
    stamp for a week (``shared.store.db.ERASED_KEPT_S``), for what read the user before.
    Message history is kept for the figures (counts by status and category, lateness) but
    anonymised: the user id
    becomes a random ``erased-...`` id (one per erasure, unlinkable), and the push's text,
    data, label, token and zone are removed. A push that was already leaving for Expo at
    that instant may still arrive.
    """
    m.get_user(user_id)
    now = m.now
    record_changes(m.db, [user_id], now, erased=True)
    m.db[dbm.USERS].delete_one({"_id": user_id})
    off = tokens.deactivate(m.db, {"userId": user_id}, ERASED, now)
    m.db[dbm.TOKENS].delete_many({"userId": user_id})
    removed = m.db[dbm.REMINDERS].delete_many({"userId": user_id}).deleted_count
    cancelled, history, pseudonym = erasure.scrub(m.db, user_id, now)
    erase_counters(m.db, user_id)
    erasure.forget_requests(m.db, user_id)
    log.info(
        "user erased: %d pending cancelled, %d tokens off, %d reminders, %d messages kept "
        "anonymised",
        cancelled,
        len(off),
        removed,
        history,
        extra={"user_id": pseudonym},
    )
    return Erased(cancelled, len(off), removed, history)
