"""``Settings``: every group under one env prefix, read once in an entry point; its errors as
one line per problem, naming the variable (and the new name of one that moved)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.settings import common, roles, services

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
# Settings that moved to a group of their own (read by more than one role): (group, field) as
# it was -> the variable to set now. One of these still set is refused, naming the new one.
MOVED: dict[tuple[str, str], str] = {
    ("creator", "lead_seconds"): "TZPUSH_WAKEUP__LEAD_SECONDS",
    ("creator", "wakeup_window_seconds"): "TZPUSH_WAKEUP__WINDOW_SECONDS",
    ("consumer", "receipts_delay_s"): "TZPUSH_OUTCOMES__RECEIPTS_DELAY_S",
    ("consumer", "max_token_failures"): "TZPUSH_OUTCOMES__MAX_TOKEN_FAILURES",
    ("consumer", "shutdown_timeout_s"): "TZPUSH_SHUTDOWN__TIMEOUT_S",
}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _log_level(v: str) -> str:
    """The level in capitals; a ``ValueError`` naming the levels for any other."""
    level = v.upper()
    if level in LOG_LEVELS:
        return level
    raise ValueError(f"{level!r} is not one of {', '.join(LOG_LEVELS)}")


LogLevel = Annotated[str, AfterValidator(_log_level)]


class Settings(BaseSettings):
    """Everything a tzpush process can be told. See README "Configuration"."""

    model_config = SettingsConfigDict(
        env_prefix="TZPUSH_",
        env_nested_delimiter="__",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="forbid",
    )

    mongo: services.MongoSettings = Field(default_factory=services.MongoSettings)
    stomp: services.StompSettings = Field(default_factory=services.StompSettings)
    expo: services.ExpoSettings = Field(default_factory=services.ExpoSettings)
    wakeup: common.WakeupSettings = Field(default_factory=common.WakeupSettings)
    creator: roles.CreatorSettings = Field(default_factory=roles.CreatorSettings)
    consumer: roles.ConsumerSettings = Field(default_factory=roles.ConsumerSettings)
    outcomes: common.OutcomeSettings = Field(default_factory=common.OutcomeSettings)
    shutdown: common.ShutdownSettings = Field(default_factory=common.ShutdownSettings)
    categories: dict[str, common.CategorySettings] = Field(
        default_factory=common.default_categories
    )
    metrics: common.MetricsSettings = Field(default_factory=common.MetricsSettings)
    local: common.LocalSettings = Field(default_factory=common.LocalSettings)
    api: roles.ApiSettings = Field(default_factory=roles.ApiSettings)
    log_level: LogLevel = Field(default="INFO", description="DEBUG, INFO, WARNING, ERROR")
    log_json: bool | None = Field(default=None, description="JSON logs; default: when no TTY")

    @field_validator("categories")
    @classmethod
    def _categories(
        cls, v: dict[str, common.CategorySettings]
    ) -> dict[str, common.CategorySettings]:
        if not v:
            raise ValueError("at least one category is needed")
        for name in v:
            if not _NAME.fullmatch(name):
                raise ValueError(f"category name {name!r} must match {_NAME.pattern}")
        return v

    # -- helpers -----------------------------------------------------------------------------
    def queue(self, category: str) -> str:
        """STOMP destination of a category's queue."""
        return f"/queue/{self.stomp.queue_prefix}.{category}"

    @property
    def dlq(self) -> str:
        """STOMP destination of the dead-letter queue."""
        return f"/queue/{self.stomp.queue_prefix}.dlq"

    def grace_seconds(self, category: str) -> int:
        """The grace window of ``category``, in seconds."""
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
    """One line per problem, each naming its env var (a moved one: with the variable to set
    now); never a value, so never a secret."""
    lines = []
    for err in exc.errors(include_input=False, include_url=False):
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            loc = [str(p).lower() for p in err["loc"]]
            moved = MOVED.get((loc[0], loc[1])) if len(loc) == 2 else None
            msg = f"moved: set {moved} instead" if moved else "unknown setting"
        lines.append(f"{_env_name(tuple(err['loc']))}: {msg}")
    return "invalid settings:\n" + "\n".join(f"  {line}" for line in lines)
