"""One settings object for every tzpush process.

Read only in entry points (`Settings.load()`), then passed down. Environment variables use the
prefix ``TZPUSH_`` and ``__`` between nested groups, e.g. ``TZPUSH_MONGO__URI``,
``TZPUSH_STOMP__PORT``, ``TZPUSH_EXPO__RATE_PER_SECOND``. A ``.env`` file in the working
directory is read too (environment variables win). Defaults point at the local stack that
``tzpush services up`` and ``tzpush fake-expo`` start.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_CATEGORIES: dict[str, int] = {
    # category -> grace window in seconds: how late a push may still go out and be useful.
    "meal": 15 * 60,
    "mood": 30 * 60,
    "activity": 15 * 60,
    "safety": 5 * 60,
    "reminders": 30 * 60,
    "medication": 60 * 60,
}

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class _Group(BaseModel):
    """A settings group: unknown keys are refused (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid")


class MongoSettings(_Group):
    """Where the source of truth lives."""

    uri: SecretStr = Field(
        default=SecretStr("mongodb://127.0.0.1:27017/?directConnection=true"),
        description="MongoDB connection string (may hold credentials, so it is never printed)",
    )
    database: str = Field(default="tzpush", description="database name")
    timeout_ms: int = Field(default=5000, ge=100, description="server selection / socket timeout")

    @field_validator("uri")
    @classmethod
    def _uri_scheme(cls, v: SecretStr) -> SecretStr:
        raw = v.get_secret_value()
        if not raw.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError("must start with mongodb:// or mongodb+srv://")
        return v


class StompSettings(_Group):
    """The broker that holds the timing (ActiveMQ Classic with schedulerSupport)."""

    host: str = Field(default="127.0.0.1", description="broker host")
    port: int = Field(default=61613, ge=1, le=65535, description="broker STOMP port")
    login: str | None = Field(default=None, description="STOMP login (optional)")
    passcode: SecretStr | None = Field(default=None, description="STOMP passcode (optional)")
    queue_prefix: str = Field(default="tzpush", description="queues are <prefix>.<category>")
    heartbeat_ms: int = Field(default=10000, ge=0, description="STOMP heart-beat both ways")
    use_ssl: bool = Field(default=False, description="TLS to the broker (Amazon MQ: true)")

    @field_validator("queue_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", v):
            raise ValueError(f"{v!r} is not a valid queue prefix (letters, digits, . _ -)")
        return v


class ExpoSettings(_Group):
    """Expo's push API (or the local fake)."""

    base_url: str = Field(default="http://127.0.0.1:8765", description="Expo host")
    access_token: SecretStr | None = Field(default=None, description="Expo access token")
    rate_per_second: float = Field(default=600.0, gt=0, description="client-side send limit")
    concurrency: int = Field(default=6, ge=1, le=64, description="requests in flight")
    timeout_s: float = Field(default=10.0, gt=0, description="HTTP timeout per request")
    max_retries: int = Field(
        default=8,
        ge=0,
        le=20,
        description="retries on 429/5xx/network (8: about 90 s of back-off before failed)",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} must start with http:// or https://")
        return v.rstrip("/")


class CreatorSettings(_Group):
    """The planner."""

    interval_seconds: int = Field(default=300, ge=5, description="planning pass period")
    horizon_hours: float = Field(default=24.0, gt=0, le=24 * 14, description="plan this far")
    slice_hours: float = Field(
        default=6.0,
        gt=0,
        description="a pass plans only once this much of the horizon is unplanned (at most "
        "half the horizon): the other passes cost one read",
    )
    wakeup_size: int = Field(default=500, ge=1, le=5000, description="message ids per wake-up")
    lead_seconds: float = Field(
        default=15.0, ge=0, le=600, description="wake-ups fire this long before the due instant"
    )
    wakeup_window_seconds: float = Field(
        default=60.0, ge=0, le=3600, description="one wake-up spans due instants this close"
    )
    janitor_margin_seconds: float = Field(
        default=120.0, ge=0, description="past grace plus this, nobody will send it: is_missed"
    )


class ConsumerSettings(_Group):
    """The workers that send."""

    prefetch: int = Field(default=200, ge=1, description="wake-ups held unacked at once")
    shutdown_timeout_s: float = Field(default=25.0, ge=0, description="grace on SIGTERM")
    receipts_delay_s: float = Field(default=900.0, ge=0, description="poll receipts after")
    receipts_interval_s: float = Field(default=60.0, gt=0, description="receipt poll period")
    receipts_give_up_s: float = Field(default=86400.0, gt=0, description="receipt-unknown after")
    max_token_failures: int = Field(default=3, ge=1, description="deactivate after N in a row")


class CategorySettings(_Group):
    grace_seconds: int = Field(ge=0, le=7 * 86400, description="how late is still useful")


class MetricsSettings(_Group):
    port: int = Field(default=9464, ge=0, le=65535, description="/metrics and /healthz; 0 = off")
    host: str = Field(default="127.0.0.1", description="bind address for /metrics")


class LocalSettings(_Group):
    """Where the local stack (`tzpush services`) keeps its files."""

    state_dir: str = Field(default=".local", description="pid files, data, logs")
    fake_expo_port: int = Field(default=8765, ge=1, le=65535, description="fake Expo port")


def _default_categories() -> dict[str, CategorySettings]:
    return {k: CategorySettings(grace_seconds=v) for k, v in DEFAULT_CATEGORIES.items()}


class Settings(BaseSettings):
    """Everything a tzpush process can be told. See README "Configuration"."""

    model_config = SettingsConfigDict(
        env_prefix="TZPUSH_",
        env_nested_delimiter="__",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="forbid",
    )

    mongo: MongoSettings = Field(default_factory=MongoSettings)
    stomp: StompSettings = Field(default_factory=StompSettings)
    expo: ExpoSettings = Field(default_factory=ExpoSettings)
    creator: CreatorSettings = Field(default_factory=CreatorSettings)
    consumer: ConsumerSettings = Field(default_factory=ConsumerSettings)
    categories: dict[str, CategorySettings] = Field(default_factory=_default_categories)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)
    log_level: str = Field(default="INFO", description="DEBUG, INFO, WARNING, ERROR")
    log_json: bool | None = Field(default=None, description="JSON logs; default: when no TTY")

    @field_validator("categories")
    @classmethod
    def _categories(cls, v: dict[str, CategorySettings]) -> dict[str, CategorySettings]:
        if not v:
            raise ValueError("at least one category is needed")
        for name in v:
            if not _NAME.fullmatch(name):
                raise ValueError(f"category name {name!r} must match {_NAME.pattern}")
        return v

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        v = v.upper()
        if v not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError(f"{v!r} is not one of DEBUG, INFO, WARNING, ERROR")
        return v

    # -- helpers -----------------------------------------------------------------------------
    def queue(self, category: str) -> str:
        """STOMP destination of a category's queue."""
        return f"/queue/{self.stomp.queue_prefix}.{category}"

    @property
    def dlq(self) -> str:
        return f"/queue/{self.stomp.queue_prefix}.dlq"

    def grace_seconds(self, category: str) -> int:
        return self.categories[category].grace_seconds

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """Read env/.env; raise SettingsError with one line per problem (secrets never shown)."""
        try:
            return cls(**overrides)
        except ValidationError as exc:
            raise SettingsError(format_validation_error(exc)) from None


class SettingsError(Exception):
    """Bad configuration: the message has one line per problem, naming the env var."""


def _env_name(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not str(p).startswith(("function-", "model-"))]
    return "TZPUSH_" + "__".join(p.upper() for p in parts) if parts else "TZPUSH_*"


def format_validation_error(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors(include_input=False, include_url=False):
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown setting"
        lines.append(f"{_env_name(tuple(err['loc']))}: {msg}")
    return "invalid settings:\n" + "\n".join(f"  {line}" for line in lines)
