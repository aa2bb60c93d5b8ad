"""What the consumer hands the Expo sender and gets back: plain values, no HTTP, no SDK.

Kept apart from ``shared.expo.sender`` so that a consumer can start consuming while that
module (requests and the Expo SDK, a sizeable share of its start-up) is still being imported in
the background: see ``consumer.cli.BackgroundSender``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from shared.domain.outcomes import ErrorCode


@dataclass(frozen=True, slots=True)
class OutgoingPush:
    """One notification to one device. ``category`` is sent as Expo's ``categoryId``."""

    message_id: str
    to: str
    title: str | None
    body: str | None
    data: dict[str, Any] | None
    category: str | None = None
    ttl: int | None = None
    priority: str | None = None
    sound: str | None = None


@dataclass(frozen=True, slots=True)
class PushOutcome:
    """What became of one push. ``error`` is a short code (``DeviceNotRegistered``,
    ``MessageTooBig``, ``InvalidToken``, ``UNAUTHORIZED``, ``HTTP 500 after 5 retries``...),
    ``message`` a sentence a person can read; ``attempts`` counts HTTP requests (0 = refused
    before sending)."""

    message_id: str
    ok: bool
    ticket_id: str | None
    error: str | None
    message: str = ""
    attempts: int = 1
    code: ErrorCode | None = None  # set on every failure: what it means (shared.domain.outcomes)

    @property
    def device_not_registered(self) -> bool:
        """The token is dead: stop sending to it."""
        return self.code is ErrorCode.DEVICE_NOT_REGISTERED


@dataclass(frozen=True, slots=True)
class ReceiptOutcome:
    ticket_id: str
    ok: bool
    error: str | None
    message: str = ""

    @property
    def code(self) -> ErrorCode | None:
        return None if self.ok else ErrorCode.of_push(self.error)

    @property
    def device_not_registered(self) -> bool:
        return self.code is ErrorCode.DEVICE_NOT_REGISTERED


@dataclass(frozen=True, slots=True)
class PreparedPush:
    """A push checked and built ahead of time (``ExpoSender.prepare``), ready to go on the wire.

    A consumer prepares a batch during its lead time, so that at the due instant only the
    requests remain: token check, payload mapping and size check are already done.
    """

    push: OutgoingPush
    ready: Any  # the SDK message with its payload built, or the PushOutcome of a refusal


OnChunkDone = Callable[[list["PushOutcome"]], None]
"""Told each request's outcomes as soon as it returns (from a sending thread, one at a time)."""
BeforeRequest = Callable[[list[str]], None]
"""Told which message ids may leave from now on, just before their request goes out."""


class Sender(Protocol):
    """What the consumer needs of a sender (``ExpoSender`` is the one real implementation)."""

    def prepare(self, pushes: Sequence[OutgoingPush]) -> list[PreparedPush]: ...

    # ``ExpoSender.send``'s signature: the pushes, then ``on_chunk_done``, ``before_request``
    # and the keyword ``retry_within_s`` (how long from now a push Expo throttled for its device
    # may still be sent again; ``None``: the sender's own window). One outcome per push.
    @property
    def send(self) -> Callable[..., list[PushOutcome]]: ...

    def close(self) -> None: ...
