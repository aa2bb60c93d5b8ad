"""Device registrations: one active registration per device id and per token string.

An Expo token belongs to an app install, not to a person: when another user logs in on the
install (same device id, or the same token string under another id), every other registration
of that device or token string is deactivated, and each user who lost one is stamped in the
intent-change log. That stamp is what makes a consumer recheck that user's pending messages in
full at send time, where an inactive token ends them ``cancelled`` with the deactivation reason.
Every deactivation goes through ``deactivate`` so no path can turn a token off silently.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection
from typing import Any

from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from shared import metrics
from shared.domain.messages import Doc
from shared.domain.outcomes import EffectKind, TokenEffect
from shared.domain.plan import bucket_of
from shared.store import db as dbm
from shared.store.intent import record_changes

TOKEN_REPLACED = "token replaced"


def deactivate(
    database: Database[Doc], flt: dict[str, Any], reason: str, now: dt.datetime
) -> list[Doc]:
    """Deactivate every active registration matching ``flt``; stamp their users in the change
    log; return the registrations this call turned off (``_id`` and ``userId``)."""
    tokens = database[dbm.TOKENS]
    hit = list(tokens.find({**flt, "isActive": True}, {"userId": 1}))
    off: list[Doc] = []
    for t in hit:
        r = tokens.update_one(
            {"_id": t["_id"], "isActive": True},
            {
                "$set": {
                    "isActive": False,
                    "deactivatedAt": now,
                    "deactivationReason": reason,
                    "updatedAt": now,
                }
            },
        )
        if r.modified_count:
            off.append(t)
    # A registration written by hand without its user has no one to stamp.
    users = {u for t in off if isinstance(u := t.get("userId"), str)}
    if users:
        record_changes(database, users, now)
    return off


def holds(doc: Doc, device: str, token: str) -> bool:
    """Whether a stored registration holds this device id or this token string."""
    return doc.get("deviceId") == device or doc.get("token") == token


def same_login(doc: Doc, user_id: str, device: str, token: str) -> bool:
    """Whether a stored registration is this very login: its user, device id and token string.
    One written by hand without one of them is not: it is another holder, replaced."""
    return (doc.get("userId"), doc.get("deviceId"), doc.get("token")) == (user_id, device, token)


def active_for(database: Database[Doc], device: str, token: str) -> list[Doc]:
    """The active registrations of this device id or of this token string.

    Two indexed lookups merged here, not one ``$or``: the MongoDB-compatible server used here
    scans the whole collection for an ``$or`` (18 ms at 1,000 tokens, growing with them), and
    each lookup alone is a point read on its partial unique index (under 1 ms)."""
    tokens = database[dbm.TOKENS]
    found = {d["_id"]: d for d in tokens.find({"deviceId": device, "isActive": True})}
    for d in tokens.find({"token": token, "isActive": True}):
        found.setdefault(d["_id"], d)
    return list(found.values())


def new_registration(user_id: str, device: str, token: str, now: dt.datetime) -> Doc:
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
    """Token hygiene: dead tokens off at once, N failures in a row off, a success resets.

    "In a row" is by push instant, whatever order the outcomes arrive in: a failure counts only
    if no success pushed after it has reset the count (``failureResetAt``), and a success resets
    only if no failure pushed after it has been counted (``lastFailureAt``). A late receipt for
    an old push therefore cannot wipe out newer failures, nor an old failure add to a newer run.

    Applying the same effects again changes nothing (a journal merged twice, or by two mergers
    at once): a failure that names its message counts once, its id kept in ``failedMessages``
    until a success resets the run (a reset only clears failures pushed before it, which the
    ``failureResetAt`` guard refuses from then on). A failure already counted still checks the
    deactivation, which a merge that stopped part-way may not have made.
    """
    tokens = database[dbm.TOKENS]
    ordered = sorted(effects, key=lambda e: e.pushed_at or now)
    failing: set[str] | None = None  # tokens with failures, looked up once if a success needs it
    for e in ordered:
        at = e.pushed_at or now
        if e.kind == EffectKind.DEAD:
            reason = e.reason or "DeviceNotRegistered"
            if deactivate(database, {"_id": e.token_id}, reason, now):
                metrics.TOKENS_DEACTIVATED.labels("DeviceNotRegistered").inc()
        elif e.kind == EffectKind.FAIL:
            # An update then a read by _id, not a find_one_and_update, and ``$not`` rather than
            # an ``$or`` with ``$exists``: the server here reads every registration for either
            # (1.4 to 3 s at 200,000 documents), once per failed push. ``$not: {$gt}`` also
            # counts a failure when the reset instant is missing or not a date.
            flt: Doc = {"_id": e.token_id, "failureResetAt": {"$not": {"$gt": at}}}
            update: Doc = {
                "$inc": {"failureCount": 1},
                "$max": {"lastFailureAt": at},
                "$set": {"updatedAt": now},
            }
            if e.message_id:
                flt["failedMessages"] = {"$ne": e.message_id}
                update["$push"] = {"failedMessages": e.message_id}
            doc = None
            if tokens.update_one(flt, update).matched_count:
                doc = tokens.find_one({"_id": e.token_id})
            elif e.message_id:  # counted before? its deactivation may be due
                doc = tokens.find_one({"_id": e.token_id, "failedMessages": e.message_id})
            if doc is None:
                continue  # a success pushed later already reset the run this belonged to
            if failing is not None:
                failing.add(e.token_id)
            if doc.get("isActive") and int(doc.get("failureCount", 0)) >= max_failures:
                reason = f"{max_failures} consecutive failures (last: {e.reason})"
                if deactivate(database, {"_id": e.token_id}, reason, now):
                    metrics.TOKENS_DEACTIVATED.labels("consecutive_failures").inc()
        elif e.kind == EffectKind.OK:
            if failing is None:
                # Only tokens that have failures need a reset: a small partial index finds them.
                failing = {
                    d["_id"]
                    for d in tokens.find({"failureCount": {"$gt": 0}}, {"_id": 1}).hint(
                        "failing_tokens"
                    )
                }
            if e.token_id not in failing:
                continue
            r = tokens.update_one(
                {
                    "_id": e.token_id,
                    "failureCount": {"$gt": 0},
                    "lastFailureAt": {"$not": {"$gt": at}},  # not an ``$or``: see FAIL above
                },
                {
                    "$set": {"failureCount": 0, "failedMessages": [], "updatedAt": now},
                    "$max": {"failureResetAt": at},
                },
            )
            if r.modified_count:
                failing.discard(e.token_id)


def insert(database: Database[Doc], doc: Doc) -> bool:
    """Insert a new registration; False when a unique index refused it (its device id or token
    string is held by an active registration: a concurrent login won)."""
    try:
        database[dbm.TOKENS].insert_one(doc)
    except DuplicateKeyError:
        return False
    return True


def insert_many(database: Database[Doc], docs: list[Doc]) -> set[int]:
    """Insert new registrations (unordered); the positions of those refused."""
    return dbm.insert_refused(database[dbm.TOKENS], docs)


def active_holding(
    database: Database[Doc], devices: Collection[str], strings: Collection[str]
) -> list[Doc]:
    """The active registrations of any of these device ids or token strings (two indexed
    lookups merged, as ``active_for``)."""
    coll = database[dbm.TOKENS]
    found = {
        d["_id"]: d for d in coll.find({"deviceId": {"$in": sorted(devices)}, "isActive": True})
    }
    for d in coll.find({"token": {"$in": sorted(strings)}, "isActive": True}):
        found.setdefault(d["_id"], d)
    return list(found.values())


def of_user(database: Database[Doc], user_id: str) -> list[Doc]:
    """The user's registrations, oldest first."""
    return list(database[dbm.TOKENS].find({"userId": user_id}).sort("createdAt", 1))


def delete(database: Database[Doc], flt: dict[str, Any]) -> int:
    """Delete the registrations matching ``flt`` (deactivated first: ``deactivate``)."""
    return int(database[dbm.TOKENS].delete_many(flt).deleted_count)
