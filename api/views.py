"""Stored documents as the API shows them (camelCase, every field typed as the models say).

Documents may have been written by other tools or edited by hand, so every read is defensive:
a field of the wrong type shows as null rather than failing the answer, and the next
occurrence of a reminder whose rule cannot be resolved is null.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from zoneinfo import ZoneInfo

from pymongo.database import Database

from api.checks import WEEKDAYS
from api.models import DeviceOut, MessageOut, OccurrenceOut, ReminderOut, UserOut
from shared.domain.localtime import next_occurrence, parse_hhmm
from shared.domain.messages import Doc
from shared.domain.validation import reminder_problem, user_problem
from shared.instants import as_time
from shared.store.mongo import reads


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _each(read: Callable[[Any], Any], doc: Doc, *names: str) -> dict[str, Any]:
    """``{name: read(doc.get(name))}``: fields shown under their stored names, each read alike."""
    return {name: read(doc.get(name)) for name in names}


def user_out(doc: Doc, categories: Iterable[str]) -> UserOut:
    prefs = _map(doc.get("prefs"))
    stored = _map(prefs.get("categories"))
    quiet = prefs.get("quietHours")
    quiet_out = None
    if (
        isinstance(quiet, list | tuple)
        and len(quiet) == 2
        and all(isinstance(q, str) for q in quiet)
    ):
        quiet_out = {"start": quiet[0], "end": quiet[1]}
    return UserOut.model_validate(
        {
            "id": str(doc["_id"]),
            "timezone": _str(doc.get("timezone")) or "",
            "enabled": bool(prefs.get("enabled", True)),
            "categories": {c: bool(stored.get(c, True)) for c in categories},
            "quietHours": quiet_out,
            "dailyCap": _int(doc.get("dailyCap")),
            **_each(as_time, doc, "createdAt", "updatedAt"),
        }
    )


def device_out(doc: Doc) -> DeviceOut:
    return DeviceOut.model_validate(
        {
            "registrationId": str(doc["_id"]),
            **_each(str, doc, "userId", "deviceId", "token"),
            "active": bool(doc.get("isActive")),
            "createdAt": as_time(doc.get("createdAt")),
        }
    )


def next_of(reminder: Doc, user: Doc | None, now: dt.datetime) -> tuple[Any, Any]:
    """(UTC, local) of the rule's next instant after ``now``; (None, None) if paused or not
    resolvable (no user, a stored field that the document rules refuse)."""
    if user is None or not reminder.get("active", True) or reminder.get("isDeleted"):
        return None, None
    if reminder_problem(reminder) or user_problem(user):
        return None, None
    tz = user["timezone"]
    occ = next_occurrence(
        parse_hhmm(reminder["time"]),
        tz,
        now.astimezone(dt.UTC),
        offset_minutes=int(reminder.get("offsetMinutes") or 0),
        weekdays=reminder.get("weekdays"),
    )
    return occ.at, occ.at.astimezone(ZoneInfo(tz))


def reminder_out(doc: Doc, user: Doc | None, now: dt.datetime, last: Doc | None) -> ReminderOut:
    nxt, local = next_of(doc, user, now)
    weekdays = doc.get("weekdays")
    days = (
        [WEEKDAYS[d] for d in weekdays if isinstance(d, int) and 0 <= d <= 6]
        if isinstance(weekdays, list)
        else None
    )
    last_out = None
    if last is not None:
        last_out = OccurrenceOut(
            at=last["scheduledAt"], status=str(last.get("status")), reason=_str(last.get("reason"))
        )
    data = doc.get("data")
    return ReminderOut.model_validate(
        {
            "id": str(doc["_id"]),
            **_each(str, doc, "userId", "category", "label"),
            "at": str(doc.get("time")),
            "offsetMinutes": _int(doc.get("offsetMinutes")) or 0,
            "weekdays": days,
            **_each(_str, doc, "title", "body"),
            "data": data if isinstance(data, dict) else None,
            "active": bool(doc.get("active", True)),
            "version": _int(doc.get("version")) or 1,
            **_each(as_time, doc, "createdAt", "updatedAt"),
            "nextOccurrenceAt": nxt,
            "nextOccurrenceLocal": local,
            "lastOccurrence": last_out,
        }
    )


def device_ids(database: Database[Doc], docs: list[Doc]) -> dict[str, str]:
    """Registration id -> device id, for the messages of a page (one query)."""
    ids = sorted(
        {d["notificationTokenId"] for d in docs if isinstance(d.get("notificationTokenId"), str)}
    )
    return reads.devices_of(database, ids)


def message_out(doc: Doc, devices: Mapping[str, str]) -> MessageOut:
    receipt = doc.get("receipt")
    receipt_out = None
    if isinstance(receipt, Mapping):
        receipt_out = {"state": _str(receipt.get("state")), "error": _str(receipt.get("error"))}
    token_id = doc.get("notificationTokenId")
    return MessageOut.model_validate(
        {
            "id": str(doc["_id"]),
            **_each(_str, doc, "userId", "reminderId", "category", "label", "title", "body"),
            **_each(_str, doc, "status", "reason", "localDate", "timezone"),
            **_each(as_time, doc, "scheduledAt", "sentAt", "finishedAt", "erasedAt"),
            "deviceId": devices.get(token_id) if isinstance(token_id, str) else None,
            "latenessMs": _int(doc.get("lateness_ms")),
            "attempts": _int(doc.get("attempts")),
            "receipt": receipt_out,
            "replayed": isinstance(doc.get("replay"), Mapping),
        }
    )
