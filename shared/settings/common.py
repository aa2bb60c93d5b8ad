"""What more than one role reads: the wake-ups' timing, how outcomes are recorded, the stop
deadline, the categories, metrics, and the local stack's files."""

from __future__ import annotations

from pydantic import Field

from shared.settings.base import Group, within

DEFAULT_CATEGORIES: dict[str, int] = {
    # category -> grace window in seconds: how late a push may still go out and be useful.
    "meal": 15 * 60,
    "mood": 30 * 60,
    "activity": 15 * 60,
    "safety": 5 * 60,
    "reminders": 30 * 60,
    "medication": 60 * 60,
}


class WakeupSettings(Group):
    """The wake-ups' timing: creators schedule them by it, consumers hold a batch by it."""

    lead_seconds: float = within(15.0, 0, 600, "wake-ups fire this long before the due instant")
    window_seconds: float = within(60.0, 0, 3600, "one wake-up spans due instants this close")


class OutcomeSettings(Group):
    """How a push's outcome is recorded, by whoever records one: consumers, replays, and the
    janitor when it merges a stopped consumer's journal."""

    receipts_delay_s: float = within(900.0, 0, 86400, "poll receipts after")
    max_token_failures: int = within(3, 1, 1000, "deactivate after N in a row")


class ShutdownSettings(Group):
    """The stop deadline of every service (creator, consumer, receipts poller, HTTP API)."""

    timeout_s: float = within(
        25.0, 0, 3600, "on SIGTERM: finish within this, exit by this + 1 s whatever is down"
    )


class CategorySettings(Group):
    """One category of reminders: how late its push is still useful."""

    grace_seconds: int = Field(ge=0, le=7 * 86400, description="how late is still useful")


class MetricsSettings(Group):
    """Where a service serves ``/metrics`` and ``/healthz``."""

    port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="/metrics and /healthz; 0 = off; unset: the role's own (creator 9464, "
        "consumer 9465, receipts 9466)",
    )
    host: str = Field(default="127.0.0.1", description="bind address for /metrics")


class LocalSettings(Group):
    """Where the local stack (`tzpush services`) keeps its files."""

    state_dir: str = Field(default=".local", description="pid files, data, logs")
    fake_expo_port: int = Field(default=8765, ge=1, le=65535, description="fake Expo port")


def default_categories() -> dict[str, CategorySettings]:
    """The categories of ``DEFAULT_CATEGORIES``, each with its grace window."""
    return {k: CategorySettings(grace_seconds=v) for k, v in DEFAULT_CATEGORIES.items()}
