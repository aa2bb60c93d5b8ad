"""Token and payload checks shared by the sender, the fake and the input paths."""

from __future__ import annotations

import pytest

from shared.domain.validation import (
    MAX_PAYLOAD_BYTES,
    is_expo_token,
    payload_size,
    validate_expo_token,
    validate_payload,
)
from shared.errors import InputError


@pytest.mark.parametrize(
    "token",
    [
        "ExponentPushToken[xxxxxxxxxxxxxxxxxxxxxx]",
        "ExpoPushToken[AbC-123_xyz]",
        "0f9e2b0c-1111-2222-3333-444455556666",
        "0F9E2B0C-AAAA-BBBB-CCCC-DDDDEEEEFFFF",
    ],
)
def test_accepts_the_three_formats(token: str) -> None:
    assert validate_expo_token(token) == token
    assert is_expo_token(token)


def test_strips_surrounding_whitespace() -> None:
    assert validate_expo_token("  ExpoPushToken[a] \n") == "ExpoPushToken[a]"


@pytest.mark.parametrize(
    "token",
    [
        "abc",
        "",
        "ExponentPushToken",  # the SDK's startswith check would let this through
        "ExponentPushToken[]",
        "ExponentPushToken[a b]",
        "ExponentPushToken[a]junk",
        "ExpoPushToken(abc)",
        "0f9e2b0c-1111-2222-3333-44445555666",
        "0f9e2b0c111122223333444455556666",
    ],
)
def test_refuses_and_names_the_token(token: str) -> None:
    with pytest.raises(InputError) as info:
        validate_expo_token(token)
    assert repr(token) in str(info.value)
    assert "ExpoPushToken[...]" in str(info.value)
    assert not is_expo_token(token)


def test_non_string_token() -> None:
    with pytest.raises(InputError):
        validate_expo_token(None)  # type: ignore[arg-type]


def test_payload_size_is_compact_utf8_json() -> None:
    assert payload_size({"a": "é"}) == len('{"a":"é"}'.encode())


def test_small_payload_passes() -> None:
    validate_payload("Lunch", "Time to eat", {"reminderId": "r1"})
    validate_payload(None, None, None)


def test_payload_at_the_limit_passes_and_one_byte_more_fails() -> None:
    to = "ExpoPushToken[a]"
    overhead = payload_size({"to": to, "body": ""})
    validate_payload(None, "x" * (MAX_PAYLOAD_BYTES - overhead), None, to=to)
    with pytest.raises(InputError) as info:
        validate_payload(None, "x" * (MAX_PAYLOAD_BYTES - overhead + 1), None, to=to)
    assert f"is {MAX_PAYLOAD_BYTES + 1} bytes" in str(info.value)
    assert "4096" in str(info.value)


def test_multibyte_text_counts_bytes_not_characters() -> None:
    with pytest.raises(InputError, match="bytes"):
        validate_payload("é" * 2100, None, None)  # 2100 characters, 4200 bytes


def test_data_counts_and_message_names_the_parts() -> None:
    with pytest.raises(InputError) as info:
        validate_payload("t", "b", {"blob": "x" * 5000})
    text = str(info.value)
    assert "data 50" in text and "title 3 bytes" in text


def test_extra_fields_count() -> None:
    body = "x" * 4000
    validate_payload(None, body, None)
    with pytest.raises(InputError):
        validate_payload(None, body, None, categoryId="c" * 100)


@pytest.mark.parametrize(
    ("title", "body", "data"),
    [(1, None, None), (None, b"x", None), (None, None, ["not", "an", "object"])],
)
def test_wrong_types(title: object, body: object, data: object) -> None:
    with pytest.raises(InputError):
        validate_payload(title, body, data)  # type: ignore[arg-type]


def test_unserialisable_data() -> None:
    with pytest.raises(InputError, match="JSON"):
        validate_payload(None, None, {"when": object()})
