"""The services a process talks to: MongoDB (the truth), the STOMP broker (the timing) and
Expo's push API (or the local fake). Every role reads these."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, SecretStr, field_validator, model_validator

from shared.settings.base import Group, is_loopback


def _write_concern(v: str) -> str:
    """``majority`` or a number of members from 1 to 50; a ``ValueError`` for anything else."""
    if v != "majority" and not (v.isdigit() and 1 <= int(v) <= 50):
        raise ValueError(f"{v!r} is neither majority nor a number of members from 1 to 50")
    return v


def _http_url(v: str) -> str:
    """An http(s) URL without its trailing slash; a ``ValueError`` for another scheme."""
    if not v.startswith(("http://", "https://")):
        raise ValueError(f"{v!r} must start with http:// or https://")
    return v.rstrip("/")


WriteConcern = Annotated[str, AfterValidator(_write_concern)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]


class MongoSettings(Group):
    """Where the source of truth lives."""

    uri: SecretStr = Field(
        default=SecretStr("mongodb://127.0.0.1:27017/?directConnection=true"),
        description="MongoDB connection string (may hold credentials, so it is never printed)",
    )
    database: str = Field(default="tzpush", description="database name")
    timeout_ms: int = Field(
        default=5000, ge=100, le=600_000, description="server selection / socket timeout"
    )
    write_concern: WriteConcern = Field(
        default="majority",
        description=(
            "write concern of the writes exactly-once rests on (send guard, journal, terminal "
            "writes, creators' leases): majority, or a number of members (1 = primary only)"
        ),
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


class StompSettings(Group):
    """The broker that holds the timing (ActiveMQ Classic with schedulerSupport)."""

    host: str = Field(default="127.0.0.1", description="broker host")
    port: int = Field(default=61613, ge=1, le=65535, description="broker STOMP port")
    endpoints: str = Field(
        default="",
        description=(
            "brokers in order, host:port,host:port (active/standby: the first that answers is "
            "used, the next on loss); empty = host:port"
        ),
    )
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

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, v: str) -> str:
        parse_endpoints(v)
        return v.strip()

    def addresses(self) -> list[tuple[str, int]]:
        """The brokers to try, in order: ``endpoints`` when set, else ``host:port`` alone."""
        return parse_endpoints(self.endpoints) or [(self.host, self.port)]

    @model_validator(mode="after")
    def _key_off_loopback(self) -> StompSettings:
        # Anyone who reaches a shared broker could otherwise send any pending push to any
        # token through the project's Expo credentials: only a loopback broker may go unsigned.
        for host, _ in self.addresses():
            if self.signing_key is None and not is_loopback(host):
                raise ValueError(
                    f"the broker {host!r} is not on loopback: set TZPUSH_STOMP__SIGNING_KEY "
                    "(the same random key for every creator and consumer) so wake-ups are signed"
                )
        return self

    @field_validator("queue_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", v):
            raise ValueError(f"{v!r} is not a valid queue prefix (letters, digits, . _ -)")
        return v


def parse_endpoints(text: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` as (host, port) pairs in order ([] for an empty text); a
    ValueError naming the item that is not ``host:port`` with a port from 1 to 65535. An IPv6
    host goes in brackets: ``[::1]:61613``."""
    out: list[tuple[str, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, port_text = item.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise ValueError(
                f"{item!r} is not host:port with a port from 1 to 65535 "
                "(endpoints are host:port,host:port, in the order to try them)"
            )
        if (host, int(port_text)) in out:
            raise ValueError(f"{item!r} is listed twice")
        out.append((host, int(port_text)))
    return out


class ExpoSettings(Group):
    """Expo's push API (or the local fake)."""

    base_url: HttpUrl = Field(default="http://127.0.0.1:8765", description="Expo host")
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
