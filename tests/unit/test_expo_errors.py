"""Issue 15, "Expo errors mean what Expo says": one enum, one table (shared.domain.outcomes).

What each code does to the device's token, to the message, whether it is sent again, whether it
raises the project alert, and whether ``tzpush replay --status failed`` may send it again.
"""

from __future__ import annotations

import datetime as dt

import pytest

from shared.domain import outcomes
from shared.domain.outcomes import EffectKind, ErrorCode, effect_of, outcome_fields, token_effect

E = ErrorCode
AT = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def test_every_code_has_exactly_one_row() -> None:
    assert set(outcomes.EXPO_ERRORS) == set(ErrorCode)


@pytest.mark.parametrize("code", [E.DEVICE_NOT_REGISTERED, E.INVALID_TOKEN])
def test_a_dead_device_and_a_locally_invalid_token_deactivate_at_once(code: ErrorCode) -> None:
    assert token_effect(False, code) is EffectKind.DEAD
    assert outcomes.EXPO_ERRORS[code].level is outcomes.Level.DEVICE


@pytest.mark.parametrize(
    "value",
    [
        "MessageTooBig",
        "InvalidPayload",
        "MessageRateExceeded",
        "InvalidCredentials",
        "MismatchSenderId",
        "UNAUTHORIZED",
        "UnknownError",
        "TOO_MANY_REQUESTS",
        "ServerError",
        "NetworkError",
        "OutcomeUnknown",
        "RequestRefused",
        "PUSH_TOO_MANY_EXPERIENCE_IDS",
    ],
)
def test_nothing_else_touches_the_token(value: str) -> None:
    code = ErrorCode(value)
    assert token_effect(False, code) is None
    assert effect_of(False, code, code.value, "tok", "user", AT, "m1") is None


def test_a_success_still_resets_the_run() -> None:
    assert token_effect(True, None) is EffectKind.OK


def test_project_level_codes_alert_and_nothing_else_does() -> None:
    project = {c for c, m in outcomes.EXPO_ERRORS.items() if m.level is outcomes.Level.PROJECT}
    assert project == {E.INVALID_CREDENTIALS, E.MISMATCH_SENDER_ID, E.UNAUTHORIZED}
    assert {c for c, m in outcomes.EXPO_ERRORS.items() if m.alert} == project


def test_what_is_sent_again_and_how() -> None:
    assert outcomes.EXPO_ERRORS[E.MESSAGE_RATE_EXCEEDED].resend is outcomes.Resend.PUSH
    assert outcomes.EXPO_ERRORS[E.TOO_MANY_EXPERIENCE_IDS].resend is outcomes.Resend.SPLIT
    resent_whole = {
        c for c, m in outcomes.EXPO_ERRORS.items() if m.resend is outcomes.Resend.REQUEST
    }
    assert resent_whole == {E.TOO_MANY_REQUESTS, E.SERVER_ERROR, E.NETWORK_ERROR}
    for code in (E.OUTCOME_UNKNOWN, E.INVALID_RESPONSE, E.UNAUTHORIZED, E.INVALID_CREDENTIALS):
        assert outcomes.EXPO_ERRORS[code].resend is outcomes.Resend.NO


def test_replay_causes_are_project_level_and_never_a_push_expo_may_have_taken() -> None:
    assert outcomes.REPLAY_CAUSES["credentials"] == {
        E.INVALID_CREDENTIALS,
        E.MISMATCH_SENDER_ID,
        E.UNAUTHORIZED,
    }
    assert outcomes.REPLAY_CAUSES["expo-down"] == {
        E.SERVER_ERROR,
        E.NETWORK_ERROR,
        E.TOO_MANY_REQUESTS,
    }
    every = set().union(*outcomes.REPLAY_CAUSES.values())
    for never in (E.OUTCOME_UNKNOWN, E.DEVICE_NOT_REGISTERED, E.MESSAGE_TOO_BIG, E.UNKNOWN):
        assert never not in every
    assert {c for c, m in outcomes.EXPO_ERRORS.items() if m.replay} == every


@pytest.mark.parametrize(
    ("label", "code"),
    [
        ("DeviceNotRegistered", E.DEVICE_NOT_REGISTERED),
        ("InvalidCredentials", E.INVALID_CREDENTIALS),
        ("MismatchSenderId", E.MISMATCH_SENDER_ID),
        ("MessageRateExceeded", E.MESSAGE_RATE_EXCEEDED),
        ("SomethingNew", E.UNKNOWN),
        ("InvalidToken", E.INVALID_TOKEN),
        ("UNAUTHORIZED", E.UNAUTHORIZED),
        ("HTTP 401", E.UNAUTHORIZED),
        ("HTTP 503 after 8 retries", E.SERVER_ERROR),
        ("TOO_MANY_REQUESTS after 2 retries", E.TOO_MANY_REQUESTS),
        ("network error (ConnectionError) after 0 retries", E.NETWORK_ERROR),
        ("network error (ReadTimeout)", E.OUTCOME_UNKNOWN),
        ("HTTP 200", E.OUTCOME_UNKNOWN),
        ("invalid response", E.OUTCOME_UNKNOWN),
        ("VALIDATION_ERROR", E.REQUEST_REFUSED),
        ("HTTP 400", E.REQUEST_REFUSED),
        ("PUSH_TOO_MANY_EXPERIENCE_IDS", "PUSH_TOO_MANY_EXPERIENCE_IDS"),
        ("client error (KeyError)", E.CLIENT_ERROR),
    ],
)
def test_a_label_reads_back_as_its_code(label: str, code: str) -> None:
    assert outcomes.label_code(label) is ErrorCode(code)


def test_a_failed_message_records_its_code() -> None:
    common = {"at": AT, "due_ms": 0, "ticket": None, "receipts_delay_s": 900.0}
    fields = outcome_fields(ok=False, error="InvalidCredentials", message="bad key", **common)
    assert fields["status"] == "failed" and fields["errorCode"] == "InvalidCredentials"
    assert "project" in fields["reason"] and "bad key" in fields["reason"]
    given = outcome_fields(
        ok=False, error="HTTP 503 after 8 retries", message="x", code=E.SERVER_ERROR, **common
    )
    assert given["errorCode"] == "ServerError"
    ok = outcome_fields(ok=True, error=None, message=None, **{**common, "ticket": "tk"})
    assert "errorCode" not in ok
