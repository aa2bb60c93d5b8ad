"""What a push's outcome means: one enum of error codes (``ErrorCode``), one table of what
each means (``EXPO_ERRORS``), the fields a message gets, and the send journal's row codec. Pure.

Expo's errors mean what Expo says (docs/architecture.md, "Expo errors"): a dead device or a token
that can never work is deactivated at once; the message's own fault fails the message; a throttle
is sent again later; the project's credentials fail the message, alert and never touch a token;
an unknown code fails the message only. Every path that learns an outcome (the consumer's
recorder, a takeover's merge of a dead consumer's journal, the receipts poller, ``tzpush replay``)
maps it through ``outcome_fields`` and ``token_effect``, and the sender asks ``EXPO_ERRORS``
what to send again; nothing else decides. The Expo transport (``shared.expo.transport``) gives
every failure an ``ErrorCode`` when it classifies it; the readable label (``HTTP 503 after 3
retries``) travels beside it for people, and reads back as its code (``label_code``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.domain.messages import Doc, Status


class ErrorCode(StrEnum):
    """Why a push failed: Expo's own ticket/receipt codes, local refusals, request failures.

    What each one means is its row in ``EXPO_ERRORS`` (docs/architecture.md, "Expo errors").
    """

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
    TOO_MANY_EXPERIENCE_IDS = "PUSH_TOO_MANY_EXPERIENCE_IDS"  # tokens of several projects
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


class Level(StrEnum):
    """Whose fault a failure is: that decides who pays for it."""

    DEVICE = "device"  # the device's token can never work: deactivate it
    MESSAGE = "message"  # the message's own fault: fail it, the device is fine
    THROTTLE = "throttle"  # too fast (for one device, or for the project): slow down, send again
    PROJECT = "project"  # the project's credentials: fail, alert, never blame a device
    SERVICE = "service"  # Expo down or unreachable: sent again, then failed
    REQUEST = "request"  # Expo refused the whole request, or the client broke
    UNKNOWN = "unknown"  # a code nobody documented: fail the message, nothing more


class Resend(StrEnum):
    """Whether and how the sender sends a failed push again (``shared.expo.sender``)."""

    NO = "no"
    REQUEST = "request"  # the whole request, with back-off, up to max_retries (``classify``)
    PUSH = "push"  # that push alone, after a back-off, until its caller's deadline
    SPLIT = "split"  # the request again, split by project as Expo's details say


@dataclass(frozen=True, slots=True)
class Meaning:
    """What one code means: whose fault (``level``), what it does to the device's token,
    whether it is sent again, whether it raises the project alert, and the
    ``tzpush replay --status failed --cause`` that may send it again (``None``: never)."""

    level: Level
    token: EffectKind | None
    resend: Resend
    alert: bool = False
    replay: str | None = None


_CREDENTIALS = Meaning(Level.PROJECT, None, Resend.NO, alert=True, replay="credentials")
_EXPO_DOWN = Meaning(Level.SERVICE, None, Resend.REQUEST, replay="expo-down")

# The one table (docs/architecture.md, "Expo errors: what each means", draws it). A failed push
# always ends its message ``failed`` with the reason; this says what else happens.
EXPO_ERRORS: dict[ErrorCode, Meaning] = {
    ErrorCode.DEVICE_NOT_REGISTERED: Meaning(Level.DEVICE, EffectKind.DEAD, Resend.NO),
    ErrorCode.INVALID_TOKEN: Meaning(Level.DEVICE, EffectKind.DEAD, Resend.NO),
    ErrorCode.MESSAGE_TOO_BIG: Meaning(Level.MESSAGE, None, Resend.NO),
    ErrorCode.INVALID_PAYLOAD: Meaning(Level.MESSAGE, None, Resend.NO),
    ErrorCode.MESSAGE_RATE_EXCEEDED: Meaning(Level.THROTTLE, None, Resend.PUSH),
    ErrorCode.INVALID_CREDENTIALS: _CREDENTIALS,
    ErrorCode.MISMATCH_SENDER_ID: _CREDENTIALS,
    ErrorCode.UNAUTHORIZED: _CREDENTIALS,
    ErrorCode.UNKNOWN: Meaning(Level.UNKNOWN, None, Resend.NO),
    ErrorCode.TOO_MANY_REQUESTS: Meaning(Level.THROTTLE, None, Resend.REQUEST, replay="expo-down"),
    ErrorCode.SERVER_ERROR: _EXPO_DOWN,
    ErrorCode.NETWORK_ERROR: _EXPO_DOWN,
    # Expo may have taken these: never sent again, by the sender or by a replay.
    ErrorCode.OUTCOME_UNKNOWN: Meaning(Level.SERVICE, None, Resend.NO),
    ErrorCode.INVALID_RESPONSE: Meaning(Level.SERVICE, None, Resend.NO),
    ErrorCode.TOO_MANY_EXPERIENCE_IDS: Meaning(Level.REQUEST, None, Resend.SPLIT),
    ErrorCode.REQUEST_REFUSED: Meaning(Level.REQUEST, None, Resend.NO),
    ErrorCode.CLIENT_ERROR: Meaning(Level.REQUEST, None, Resend.NO),
}

# Which failures say something about the device, as the token hygiene reads it. No Expo code
# counts as "one more failure in a row" (``EffectKind.FAIL``) today: each says either that the
# device is gone or nothing about it. The consecutive-failure rule stays for a code that would.
TOKEN_EFFECTS: dict[ErrorCode, EffectKind | None] = {c: m.token for c, m in EXPO_ERRORS.items()}

# ``tzpush replay --status failed --cause NAME``: failures for a cause outside the message and
# the device, whose push certainly never reached a device (and was certainly not taken by Expo,
# save the 5xx risk the sender's own retries take too), so sending it again is no duplicate.
REPLAY_CAUSES: dict[str, frozenset[ErrorCode]] = {
    cause: frozenset(c for c, m in EXPO_ERRORS.items() if m.replay == cause)
    for cause in ("credentials", "expo-down")
}


def meaning(code: ErrorCode | None) -> Meaning:
    """The row of ``code`` (``None``: an unknown failure)."""
    return EXPO_ERRORS[code or ErrorCode.UNKNOWN]


def is_project_level(code: ErrorCode | None) -> bool:
    """The project's fault (credentials): alert, and never blame a device for it."""
    return code is not None and EXPO_ERRORS[code].level is Level.PROJECT


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
    code: ErrorCode | None = None,
) -> Doc:
    """The terminal fields of a message whose push returned at ``at``: ``success`` with its
    ticket and a receipt to check later, or ``failed`` with the reason and ``errorCode`` (the
    code's value: what ``tzpush replay --status failed`` and ``tzpush doctor`` select on).
    ``code`` defaults to the one ``error``, the label, reads back as (``label_code``)."""
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
    code = code or label_code(error)
    return {
        "status": Status.FAILED.value,
        "finishedAt": at,
        "lateness_ms": lateness,
        "reason": failure_reason(code, error, message),
        "error": error,
        "errorCode": code.value,
    }


def failure_reason(code: ErrorCode, error: str | None, message: str | None) -> str:
    """The reason a person reads on a failed message; a project-level one says it is the
    project's, that no token was touched, and what to do."""
    said = message or error or "failed"
    if EXPO_ERRORS[code].level is not Level.PROJECT:
        return said
    return (
        f"project-level error {code.value} ({said}): the project's push credentials, not the "
        "device; tokens untouched. Fix them, then `tzpush replay --status failed --cause "
        "credentials`"
    )


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
    return label_code(label)


_RETRIED = re.compile(r" after \d+ retries$")


def label_code(label: str | None) -> ErrorCode:
    """The code an error label stands for. Labels are what ``shared.expo`` writes: Expo's own
    spelling of a per-push code, a code's value (``InvalidToken``, ``UNAUTHORIZED``), or a request
    failure (``HTTP 503 after 8 retries``, ``network error (ConnectionError) after 8 retries``,
    ``network error (ReadTimeout)``, ``invalid response``, ``VALIDATION_ERROR``...). A request that
    failed after its retries says so; one that reached Expo and lost its answer does not."""
    if not label:
        return ErrorCode.UNKNOWN
    base = _RETRIED.sub("", label)
    retried = base != label
    try:
        return ErrorCode(base)
    except ValueError:
        pass
    if base.startswith("HTTP "):
        status = base[5:]
        if status.startswith("5"):
            return ErrorCode.SERVER_ERROR
        if status == "429":
            return ErrorCode.TOO_MANY_REQUESTS
        if status == "401":
            return ErrorCode.UNAUTHORIZED
        if status.startswith("4"):
            return ErrorCode.REQUEST_REFUSED
        return ErrorCode.OUTCOME_UNKNOWN  # a 2xx the SDK could not use: Expo took it
    if base.startswith("network error"):
        return ErrorCode.NETWORK_ERROR if retried else ErrorCode.OUTCOME_UNKNOWN
    if base == "invalid response":
        return ErrorCode.OUTCOME_UNKNOWN
    if base.startswith("client error"):
        return ErrorCode.CLIENT_ERROR
    if base.isupper():  # Expo's whole-request codes: VALIDATION_ERROR, PUSH_TOO_MANY_...
        return ErrorCode.REQUEST_REFUSED
    return ErrorCode.UNKNOWN  # a per-push code Expo added since (its spelling stays in error)
