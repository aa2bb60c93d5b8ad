"""One settings object for every tzpush process.

Read only in entry points (`Settings.load()`), then passed down. Environment variables use the
prefix ``TZPUSH_`` and ``__`` between nested groups, e.g. ``TZPUSH_MONGO__URI``,
``TZPUSH_STOMP__PORT``, ``TZPUSH_EXPO__RATE_PER_SECOND``. A ``.env`` file in the working
directory is read too (environment variables win). Defaults point at the local stack that
``tzpush services up`` and ``tzpush fake-expo`` start.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
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
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Group(BaseModel):
    """A settings group: unknown keys are refused (a typo must not be silently ignored), and so
    are ``inf`` and ``nan`` (every number has a finite range)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class MongoSettings(_Group):
    """Where the source of truth lives."""

    uri: SecretStr = Field(
        default=SecretStr("mongodb://127.0.0.1:27017/?directConnection=true"),
        description="MongoDB connection string (may hold credentials, so it is never printed)",
    )
    database: str = Field(default="tzpush", description="database name")
    timeout_ms: int = Field(
        default=5000, ge=100, le=600_000, description="server selection / socket timeout"
    )

    @field_validator("uri")
    @classmethod
    def _uri_scheme(cls, v: SecretStr) -> SecretStr:
        raw = v.get_secret_value()
        if not raw.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError("must start with mongodb:// or mongodb+srv://")
        problem = _mongo_uri_problem(raw)
        if problem:
            raise ValueError(problem)
        return v


def _mongo_uri_problem(uri: str) -> str | None:
    """What the driver would refuse in ``uri`` (hosts, ports, options), without any I/O: a
    ``mongodb+srv://`` name is not looked up, only its shape is checked. Never echoes the URI
    (it may hold a password)."""
    from pymongo import uri_parser  # only when a URI is set: most commands never need it

    srv = uri.startswith("mongodb+srv://")
    plain = "mongodb://" + uri.removeprefix("mongodb+srv://") if srv else uri
    try:
        parsed = uri_parser.parse_uri(plain)
    except Exception as exc:  # InvalidURI, ConfigurationError, ValueError: all say what
        return f"not a valid connection string: {str(exc).splitlines()[0][:160]}"
    if srv and (
        len(parsed["nodelist"]) != 1
        or ":" in uri.removeprefix("mongodb+srv://").split("/")[0].rsplit("@", 1)[-1]
    ):
        return "a mongodb+srv:// connection string names one host name, without a port"
    return None


class StompSettings(_Group):
    """The broker that holds the timing (ActiveMQ Classic with schedulerSupport)."""

    host: str = Field(default="127.0.0.1", description="broker host")
    port: int = Field(default=61613, ge=1, le=65535, description="broker STOMP port")
    login: str | None = Field(default=None, description="STOMP login (optional)")
    passcode: SecretStr | None = Field(default=None, description="STOMP passcode (optional)")
    queue_prefix: str = Field(default="tzpush", description="queues are <prefix>.<category>")
    heartbeat_ms: int = Field(
        default=10000, ge=0, le=3_600_000, description="STOMP heart-beat both ways"
    )
    use_ssl: bool = Field(default=False, description="TLS to the broker (Amazon MQ: true)")
    signing_key: SecretStr | None = Field(
        default=None,
        description=(
            "HMAC key that signs wake-ups (creators) and authenticates them (consumers): "
            "required unless the broker is on loopback"
        ),
    )

    @field_validator("signing_key")
    @classmethod
    def _key(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and len(v.get_secret_value()) < 16:
            raise ValueError(
                "must be at least 16 characters (use a random one: openssl rand -hex 32)"
            )
        return v

    @model_validator(mode="after")
    def _key_off_loopback(self) -> StompSettings:
        # Anyone who reaches a shared broker could otherwise send any pending push to any
        # token through the project's Expo credentials: only a loopback broker may go unsigned.
        if self.signing_key is None and not _is_loopback(self.host):
            raise ValueError(
                f"the broker {self.host!r} is not on loopback: set TZPUSH_STOMP__SIGNING_KEY "
                "(the same random key for every creator and consumer) so wake-ups are signed"
            )
        return self

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
    rate_per_second: float = Field(
        default=600.0, gt=0, le=1_000_000, description="client-side send limit"
    )
    concurrency: int = Field(default=6, ge=1, le=64, description="requests in flight")
    timeout_s: float = Field(default=10.0, gt=0, le=600, description="HTTP timeout per request")
    max_retries: int = Field(
        default=8,
        ge=0,
        le=20,
        description=(
            "retries on 429, 5xx and connections refused (8: about 90 s of back-off before "
            "failed); never after Expo may have accepted a chunk"
        ),
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} must start with http:// or https://")
        return v.rstrip("/")


def _within(default: float, low: float, high: float, what: str, *, above: bool = False) -> Any:
    """A number setting with its bounds: ``low <= value <= high`` (``low < value`` if ``above``)."""
    if above:
        return Field(default=default, gt=low, le=high, description=what)
    return Field(default=default, ge=low, le=high, description=what)


class CreatorSettings(_Group):
    """The planner."""

    interval_seconds: int = _within(300, 5, 7 * 86400, "planning pass period")
    horizon_hours: float = _within(24.0, 0, 24 * 14, "plan this far", above=True)
    slice_hours: float = _within(
        6.0,
        0,
        24 * 14,
        "a pass plans only once this much of the horizon is unplanned (at most half the "
        "horizon): the other passes cost one read",
        above=True,
    )
    wakeup_size: int = _within(500, 1, 5000, "message ids per wake-up")
    lead_seconds: float = _within(15.0, 0, 600, "wake-ups fire this long before the due instant")
    wakeup_window_seconds: float = _within(
        60.0, 0, 3600, "one wake-up spans due instants this close"
    )
    janitor_margin_seconds: float = _within(
        120.0, 0, 86400, "past grace plus this, nobody will send it: is_missed"
    )
    partitions: int = _within(
        16,
        1,
        4096,
        "users are split into this many partitions by a hash of the user id; running creators "
        "share them (same value on every creator)",
    )
    lease_seconds: float = _within(
        60.0,
        3,
        86400,
        "a creator's hold on its partitions, renewed every third of it; a dead creator's "
        "partitions pass to the others this long after its last renewal (keep it under "
        "interval_seconds)",
    )


class ConsumerSettings(_Group):
    """The workers that send."""

    prefetch: int = _within(200, 1, 100_000, "wake-ups held unacked at once")
    shutdown_timeout_s: float = _within(
        25.0, 0, 3600, "on SIGTERM: finish within this, exit by this + 1 s whatever is down"
    )
    receipts_delay_s: float = _within(900.0, 0, 86400, "poll receipts after")
    receipts_interval_s: float = _within(60.0, 0, 86400, "receipt poll period", above=True)
    receipts_give_up_s: float = _within(86400.0, 0, 7 * 86400, "receipt-unknown after", above=True)
    max_token_failures: int = _within(3, 1, 1000, "deactivate after N in a row")


class CategorySettings(_Group):
    grace_seconds: int = Field(ge=0, le=7 * 86400, description="how late is still useful")


class MetricsSettings(_Group):
    port: int = Field(default=9464, ge=0, le=65535, description="/metrics and /healthz; 0 = off")
    host: str = Field(default="127.0.0.1", description="bind address for /metrics")


class LocalSettings(_Group):
    """Where the local stack (`tzpush services`) keeps its files."""

    state_dir: str = Field(default=".local", description="pid files, data, logs")
    fake_expo_port: int = Field(default=8765, ge=1, le=65535, description="fake Expo port")


_KEY_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class ApiKey(_Group):
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


class ApiSettings(_Group):
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
    rate_per_second: float = _within(
        200.0, 0, 1_000_000, "requests a second per API key, on average (429 over it)", above=True
    )
    burst: int = _within(400, 1, 1_000_000, "requests per API key allowed at once after a pause")
    login_queue: int = _within(
        1000, 1, 1_000_000, "logins waiting to be written at most; past it 503 with Retry-After"
    )
    console_read_only: bool = Field(
        default=False, description="the console shows everything and offers no action"
    )
    console_session_hours: float = _within(
        12.0, 0, 24 * 30, "a console login lasts this long", above=True
    )

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
    api: ApiSettings = Field(default_factory=ApiSettings)
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
        level = v.upper()
        if level in LOG_LEVELS:
            return level
        raise ValueError(f"{level!r} is not one of {', '.join(LOG_LEVELS)}")

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
