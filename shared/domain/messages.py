"""A notification message's life: its statuses, its document, how it ends. Pure, no I/O.

Every message is made by ``new_message`` (the planner, the tests and the bench alike) and every
terminal write carries the fields ``terminal_update`` gives it, so a status, a reason and the
instant it ended always travel together. The grace rule (``past_grace``) is the one place that
decides when a push is too late to be useful: the consumer at the due instant and the janitor
afterwards ask the same question.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

Doc = dict[str, Any]
"""A MongoDB document as the driver hands it over."""


class Status(StrEnum):
    """A message's status. ``pending`` -> terminal (``success`` ... ``cancelled``); a replay
    passes through ``replaying``. Stored as the plain string (a StrEnum is a str)."""

    PENDING = "pending"
    REPLAYING = "replaying"
    SUCCESS = "success"
    FAILED = "failed"
    IS_MISSED = "is_missed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({Status.SUCCESS, Status.FAILED, Status.IS_MISSED, Status.CANCELLED})
ENDED_WITHOUT_SUCCESS = (Status.CANCELLED, Status.FAILED, Status.IS_MISSED)


def message_id(reminder_id: str, version: int, token_id: str, local_date: dt.date) -> str:
    """Deterministic id of one occurrence for one token: planning twice makes the same id."""
    return f"{reminder_id}:{version}:{token_id}:{local_date:%Y%m%d}"


def new_message(
    reminder: Mapping[str, Any],
    user: Mapping[str, Any],
    token: Mapping[str, Any],
    at: dt.datetime,
    local_date: dt.date,
    now: dt.datetime,
) -> Doc:
    """The pending message document for one occurrence (due ``at``) of ``reminder`` on ``token``.

    It carries a snapshot of what the consumer needs at the due instant (token, content, zone,
    cap, quiet hours), so nothing is read per message before sending; the intent-change log
    says when the snapshot must not be trusted.
    """
    version = reminder.get("version", 1)
    return {
        "_id": message_id(reminder["_id"], version, token["_id"], local_date),
        "userId": reminder["userId"],
        "reminderId": reminder["_id"],
        "reminderVersion": version,
        "notificationTokenId": token["_id"],
        "token": token["token"],
        "category": reminder["category"],
        "label": reminder["label"],
        "title": reminder.get("title"),
        "body": reminder.get("body"),
        "data": reminder.get("data"),
        "scheduledAt": at,
        "localDate": local_date.isoformat(),
        "timezone": user["timezone"],
        "dailyCap": user.get("dailyCap"),
        "quietHours": (user.get("prefs") or {}).get("quietHours"),
        "status": Status.PENDING.value,
        "isDeleted": False,
        "attempts": 0,
        "plannedAt": now,
        "createdAt": now,
    }


def terminal_update(status: Status, reason: str, now: dt.datetime, **fields: Any) -> Doc:
    """The ``$set`` of a terminal write: status, a reason a person can read, when it ended."""
    if status not in TERMINAL:
        raise ValueError(f"{status!r} is not a terminal status")
    return {"status": status.value, "reason": reason, "finishedAt": now, **fields}


def past_grace(due_ms: int, now_ms: int, grace_s: float, margin_s: float = 0.0) -> bool:
    """Whether a push due at ``due_ms`` is too late to be useful at ``now_ms``.

    ``margin_s`` is the janitor's extra patience: it ends only what a consumer would also have
    ended, with room for a consumer that is a little late itself.
    """
    return now_ms - due_ms > (grace_s + margin_s) * 1000


def missed_reason(late_ms: int, grace_s: float) -> str:
    """Why a message that reached a consumer after its grace window was not sent."""
    return f"{late_ms / 1000:.0f} s late, grace {grace_s:.0f} s"


def outcome_unknown(owner: object) -> str:
    """Reason for a message whose Expo request may or may not have gone out."""
    return (
        f"outcome unknown: consumer {owner} stopped during the Expo request; "
        "not retried, to avoid a duplicate push"
    )
