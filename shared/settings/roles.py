"""Each role's own settings: the creator, the consumer (and receipts poller), the HTTP API.
A role reads its own group and the common ones (``common``), never another role's."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from shared.settings.base import Group, within


class CreatorSettings(Group):
    """The planner."""

    interval_seconds: int = within(300, 5, 7 * 86400, "planning pass period")
    horizon_hours: float = within(24.0, 0, 24 * 14, "plan this far", above=True)
    slice_hours: float = within(
        6.0,
        0,
        24 * 14,
        "a pass plans only once this much of the horizon is unplanned (at most half the "
        "horizon): the other passes cost one read",
        above=True,
    )
    wakeup_size: int = within(500, 1, 5000, "message ids per wake-up")
    janitor_margin_seconds: float = within(
        120.0, 0, 86400, "past grace plus this, nobody will send it: is_missed"
    )
    partitions: int = within(
        16,
        1,
        4096,
        "users are split into this many partitions by a hash of the user id; running creators "
        "share them (same value on every creator)",
    )
    max_reminders_per_user: int = within(
        500,
        1,
        100_000,
        "reminders one user may have; a new one past it is refused (409), so what a change of "
        "the user costs stays bounded",
    )
    lease_seconds: float = within(
        60.0,
        3,
        86400,
        "a creator's hold on its partitions, renewed every third of it; a dead creator's "
        "partitions pass to the others this long after its last renewal (keep it under "
        "interval_seconds)",
    )


class ConsumerSettings(Group):
    """The workers that send, and the receipts poller."""

    prefetch: int = within(200, 1, 100_000, "wake-ups held unacked at once")
    receipts_interval_s: float = within(60.0, 0, 86400, "receipt poll period", above=True)
    receipts_give_up_s: float = within(86400.0, 0, 7 * 86400, "receipt-unknown after", above=True)


_KEY_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class ApiKey(Group):
    """One key of the HTTP API: who (``name``, never the key), what it may do (``scope``), and
    the SHA-256 of the key in hex (the key itself is never stored)."""

    name: str = Field(
        pattern=_KEY_NAME.pattern,
        description="who holds the key (1 to 64 of A-Z a-z 0-9 _ . -), in logs; never the key",
    )
    scope: Literal["app", "ops"] = Field(
        description="app (users, devices, reminders, messages) or ops (also "
        "stats, replays, /metrics)"
    )
    sha256: SecretStr = Field(description="hex SHA-256 of the key: tzpush api --new-key NAME")

    @field_validator("sha256")
    @classmethod
    def _hash(cls, v: SecretStr) -> SecretStr:
        raw = v.get_secret_value().strip().lower()
        if not _SHA256_HEX.fullmatch(raw):
            raise ValueError("must be 64 hex digits (the SHA-256 of the key, not the key)")
        return SecretStr(raw)


class ApiSettings(Group):
    """The HTTP API (``tzpush api``)."""

    host: str = Field(default="127.0.0.1", description="bind address of the HTTP API")
    port: int = Field(default=8080, ge=0, le=65535, description="HTTP API port (0: any free)")
    keys: list[ApiKey] = Field(
        default_factory=list,
        description='JSON list of {"name", "scope": "app" or "ops", "sha256"}: the bearer keys, '
        "stored as hashes (no key: every request but health checks is refused)",
    )
    max_body_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="request bodies over this are refused (413)",
    )
    rate_per_second: float = within(
        200.0, 0, 1_000_000, "requests a second per API key, on average (429 over it)", above=True
    )
    burst: int = within(400, 1, 1_000_000, "requests per API key allowed at once after a pause")
    login_queue: int = within(
        1000, 1, 1_000_000, "logins waiting to be written at most; past it 503 with Retry-After"
    )
    console_read_only: bool = Field(
        default=False, description="the console shows everything and offers no action"
    )
    console_session_hours: float = within(
        12.0, 0, 24 * 30, "a console login lasts this long", above=True
    )

    work_threads: int = within(
        8,
        1,
        200,
        "threads that run the routes' database work at once; more wait (each holds the "
        "interpreter's lock in turn, and the health probes' event loop waits behind them all)",
    )
    trusted_proxies: str = Field(
        default="127.0.0.1",
        description="comma-separated addresses or networks (CIDR) whose X-Forwarded-Proto and "
        "X-Forwarded-For are believed (the load balancer's), or * for any peer (when only the "
        "load balancer can reach the API); the console's cookie is Secure behind HTTPS",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, v: str) -> str:
        entries = [e.strip() for e in v.split(",") if e.strip()]
        if not entries:
            raise ValueError("name at least one address, network or *")
        for entry in entries:
            if entry == "*":
                continue
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address, a network (CIDR) or *") from None
        return ",".join(entries)

    @field_validator("keys")
    @classmethod
    def _unique(cls, v: list[ApiKey]) -> list[ApiKey]:
        names = [k.name for k in v]
        if len(set(names)) != len(names):
            raise ValueError("two keys have the same name")
        hashes = [k.sha256.get_secret_value() for k in v]
        if len(set(hashes)) != len(hashes):
            raise ValueError("two keys have the same hash (one key, two names)")
        return v
