"""What a push's outcome means: one enum of error codes, one table of token effects, the fields
a message gets, and the send journal's row codec. Pure, no I/O.

Every path that learns an outcome (the consumer's recorder, a takeover's merge of a dead
consumer's journal, the receipts poller, ``tzpush replay``) maps it through ``outcome_fields`` and
``token_effect``; nothing else decides which failures count against a device. The Expo transport
(``shared.expo.transport``) gives every failure an ``ErrorCode`` when it classifies it; the
readable label (``HTTP 503 after 3 retries``) travels beside it for people.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.domain.messages import Doc, Status


class ErrorCode(StrEnum):
    """Why a push failed: Expo's own ticket/receipt codes, local refusals, request failures."""

    # Expo's per-push codes (a ticket's or a receipt's details.error).
    DEVICE_NOT_REGISTERED = "DeviceNotRegistered"
    MESSAGE_TOO_BIG = "MessageTooBig"
    MESSAGE_RATE_EXCEEDED = "MessageRateExceeded"
    MISMATCH_SENDER_ID = "MismatchSenderId"
    INVALID_CREDENTIALS = "InvalidCredentials"
    UNKNOWN = "UnknownError"  # a per-push code this enum does not know
    # Refused here, before any request.
    INVALID_TOKEN = "InvalidToken"
    INVALID_PAYLOAD = "InvalidPayload"
    # The whole request failed: it says nothing about any one device.
    TOO_MANY_REQUESTS = "TOO_MANY_REQUESTS"
    SERVER_ERROR = "ServerError"  # 5xx, after the retries
    NETWORK_ERROR = "NetworkError"
    INVALID_RESPONSE = "InvalidResponse"  # a 2xx whose body could not be used
    UNAUTHORIZED = "UNAUTHORIZED"
    REQUEST_REFUSED = "RequestRefused"  # another 4xx (VALIDATION_ERROR, PUSH_TOO_MANY_...)
    CLIENT_ERROR = "ClientError"  # the SDK raised something unexpected
    # The request reached Expo and its answer was lost (read timeout, connection lost after the
    # request was written) or unreadable (a 2xx): Expo may have accepted it. Never resent.
    OUTCOME_UNKNOWN = "OutcomeUnknown"

    @classmethod
    def of_push(cls, code: str | None) -> ErrorCode:
        """The code of a per-push error as Expo spells it (unknown spellings -> ``UNKNOWN``)."""
        try:
            return cls(code or "")
        except ValueError:
            return cls.UNKNOWN


class EffectKind(StrEnum):
    DEAD = "dead"  # deactivate the token at once
    FAIL = "fail"  # one more consecutive failure (N in a row deactivate it)
    OK = "ok"  # a success: the run of failures is over


# Which failures say something about the device. Request-level failures and the message's own
# fault (too big, not JSON) say nothing about it.
TOKEN_EFFECTS: dict[ErrorCode, EffectKind | None] = {
    ErrorCode.DEVICE_NOT_REGISTERED: EffectKind.DEAD,
    ErrorCode.MESSAGE_TOO_BIG: None,
    ErrorCode.INVALID_PAYLOAD: None,
    ErrorCode.MESSAGE_RATE_EXCEEDED: EffectKind.FAIL,
    ErrorCode.MISMATCH_SENDER_ID: EffectKind.FAIL,
    ErrorCode.INVALID_CREDENTIALS: EffectKind.FAIL,
    ErrorCode.UNKNOWN: EffectKind.FAIL,
    ErrorCode.INVALID_TOKEN: EffectKind.FAIL,
    ErrorCode.TOO_MANY_REQUESTS: None,
    ErrorCode.SERVER_ERROR: None,
    ErrorCode.NETWORK_ERROR: None,
    ErrorCode.INVALID_RESPONSE: None,
    ErrorCode.UNAUTHORIZED: None,
    ErrorCode.REQUEST_REFUSED: None,
    ErrorCode.CLIENT_ERROR: None,
    ErrorCode.OUTCOME_UNKNOWN: None,
}


def token_effect(ok: bool, code: ErrorCode | None) -> EffectKind | None:
    """What one push's outcome does to its token (``None``: nothing)."""
    if ok:
        return EffectKind.OK
    return TOKEN_EFFECTS[code or ErrorCode.UNKNOWN]


@dataclass
class TokenEffect:
    """What one push says about its token. ``pushed_at`` is when that push was made: outcomes
    (tickets, late receipts, a takeover's merge) arrive out of order, and "consecutive" failures
    are counted in push order, not in the order their news arrives. ``message_id`` names the
    push: a failure that carries it counts once however often its outcome is applied (a journal
    merged again)."""

    token_id: str
    user_id: str
    kind: EffectKind
    reason: str = ""
    pushed_at: dt.datetime | None = None
    message_id: str = ""


def outcome_fields(
    *,
    ok: bool,
    at: dt.datetime,
    due_ms: int,
    ticket: str | None,
    error: str | None,
    message: str | None,
    receipts_delay_s: float,
) -> Doc:
    """The terminal fields of a message whose push returned at ``at``: ``success`` with its
    ticket and a receipt to check later, or ``failed`` with the reason."""
    lateness = int(at.timestamp() * 1000) - due_ms
    if ok:
        return {
            "status": Status.SUCCESS.value,
            "ticketId": ticket,
            "sentAt": at,
            "finishedAt": at,
            "lateness_ms": lateness,
            "reason": "accepted by Expo",
            "receipt": {
                "state": "pending",
                "checkAfter": at + dt.timedelta(seconds=receipts_delay_s),
            },
        }
    return {
        "status": Status.FAILED.value,
        "finishedAt": at,
        "lateness_ms": lateness,
        "reason": message or error or "failed",
        "error": error,
    }


def effect_of(
    ok: bool,
    code: ErrorCode | None,
    error: str | None,
    token_id: str,
    user_id: str,
    at: Any,
    message_id: str = "",
) -> TokenEffect | None:
    """The ``TokenEffect`` of one outcome, or ``None`` when it says nothing about the token."""
    kind = token_effect(ok, code)
    if kind is None:
        return None
    reason = "" if ok else (error or code or "")
    return TokenEffect(token_id, user_id, kind, reason, at, message_id)


# -- the send journal's rows ----------------------------------------------------------------------
# A journal row: what one push's outcome needs to be merged, the fields that differ between the
# pushes of one request. The request's instant and consumer are stored once beside its rows.
ROW_FIELDS = (
    *("id", "ok", "ticket", "error", "message", "attempts"),
    *("token", "user", "cap", "ld", "due", "code"),
)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS = dt.timedelta(milliseconds=1)  # BSON dates hold milliseconds; packed journals the same


def journal_row(**fields: Any) -> list[Any]:
    """One row in ``ROW_FIELDS`` order (every field named, none extra)."""
    if set(fields) != set(ROW_FIELDS):
        raise ValueError(f"a journal row takes {ROW_FIELDS}, not {sorted(fields)}")
    return [fields[f] for f in ROW_FIELDS]


def row_entries(rows: list[list[Any]], at: dt.datetime, consumer: str) -> list[Doc]:
    """The entries (what ``entry_outcome`` reads) of one request's journal rows."""
    out = []
    for r in rows:
        entry = dict(zip(ROW_FIELDS, r, strict=False))
        entry.setdefault("code", None)  # rows journaled before codes were
        out.append({**entry, "at": at, "consumer": consumer})
    return out


def pack_journal(requests: list[tuple[dt.datetime, list[list[Any]]]]) -> bytes:
    """Requests' journal rows as one compact JSON value: ``[[at_ms, rows], ...]``.

    Thousands of small sub-documents cost the database a decode each and the consumer an encode
    each, in the middle of a herd (a third of the MongoDB-compatible server's CPU here); one
    binary value of plain rows costs one. Nothing queries inside it: it is read back whole.
    """
    return json.dumps(
        [[(at - _EPOCH) // _MS, rows] for at, rows in requests], separators=(",", ":")
    ).encode()


def journal_entries(doc: Doc) -> list[Doc]:
    """The entries of a journal document (``entries`` as written before they were packed)."""
    if "packed" not in doc:
        return list(doc.get("entries") or [])
    entries: list[Doc] = []
    for at_ms, rows in json.loads(doc["packed"]):
        entries += row_entries(rows, _EPOCH + at_ms * _MS, doc.get("consumer", ""))
    return entries


def entry_code(entry: Doc) -> ErrorCode | None:
    """An entry's error code; entries journaled before codes were get theirs from the label."""
    if entry["ok"]:
        return None
    if entry.get("code"):
        return ErrorCode(entry["code"])
    return legacy_code(entry.get("error"))


def legacy_code(label: str | None) -> ErrorCode:
    """The code of an error label journaled before labels carried codes (older consumers)."""
    try:
        return ErrorCode(label or "")
    except ValueError:
        pass
    request_level = (
        "HTTP",
        "TOO_MANY_REQUESTS",
        "network error",
        "UNAUTHORIZED",
        "client error",
        "invalid response",
        "VALIDATION_ERROR",
        "PUSH_TOO_MANY",
    )
    if label and label.startswith(request_level):
        return ErrorCode.REQUEST_REFUSED
    return ErrorCode.UNKNOWN
