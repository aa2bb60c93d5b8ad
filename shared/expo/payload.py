"""One push as Expo will see it: the token checked, the payload built once, its size measured.

A push refused here never reaches Expo: its outcome carries ``attempts == 0`` and the code
(``InvalidToken``, ``InvalidPayload``, ``MessageTooBig``) that says why.
"""

from __future__ import annotations

from typing import Any

from exponent_server_sdk import PushMessage

from shared.domain.outcomes import ErrorCode
from shared.domain.validation import MAX_PAYLOAD_BYTES, payload_size, validate_expo_token
from shared.errors import InputError
from shared.expo.pushes import OutgoingPush, PushOutcome

_SDK_TOKEN_STAND_IN = "ExponentPushToken[stand-in]"
# What an OutgoingPush carries into the SDK's message besides the recipient.
_PUSH_FIELDS = ("data", "title", "body", "category", "ttl", "priority", "sound")


class SdkMessage(PushMessage):
    """The SDK's message with its too-narrow token check skipped (we validated already).

    The payload is built once (by the SDK's own field mapping) and kept: we measure it before
    sending and the SDK serialises it, and a retry reuses it.
    """

    _payload: dict[str, Any] | None = None

    def get_payload(self) -> dict[str, Any]:
        if self._payload is None:
            stand_in = PushMessage(*self)._replace(to=_SDK_TOKEN_STAND_IN)
            payload: dict[str, Any] = stand_in.get_payload()
            payload["to"] = self.to
            self._payload = payload
        return self._payload


def check_push(push: OutgoingPush) -> SdkMessage | PushOutcome:
    """The push as the SDK's message, payload built; or the outcome of refusing it here."""

    def refuse(code: ErrorCode, message: str) -> PushOutcome:
        return PushOutcome(push.message_id, False, None, code.value, message, 0, code)

    try:
        to = validate_expo_token(push.to)
    except InputError as exc:
        return refuse(ErrorCode.INVALID_TOKEN, str(exc))
    message = SdkMessage(to=to, **{f: getattr(push, f) for f in _PUSH_FIELDS})
    try:
        size = payload_size(message.get_payload())
    except (TypeError, ValueError) as exc:
        return refuse(ErrorCode.INVALID_PAYLOAD, f"payload is not JSON-serialisable: {exc}")
    if size > MAX_PAYLOAD_BYTES:
        return refuse(
            ErrorCode.MESSAGE_TOO_BIG,
            f"payload is {size} bytes as Expo JSON, over the {MAX_PAYLOAD_BYTES}-byte limit",
        )
    return message
