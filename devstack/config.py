"""Where the local stack lives and listens: `StackConfig`, its errors and the loopback rules.

The bottom of the local stack (install, processes, probes and `LocalStack` all build on it) and
free of side effects: nothing here installs, starts or connects to anything, so the address checks
are unit-tested alone and the CLI can name the services without loading the process code.
Everything lives under the state dir (``settings.local.state_dir``, default ``.local``)::

    STATE/activemq.pid, STATE/mongo.pid      pid files: `down` stops only what they name
    STATE/activemq/base/lib/                 xstream.jar + jettison.jar (Debian classpath fix)
    STATE/activemq/data/                     KahaDB, scheduler store, activemq.log
    STATE/activemq-b/data/                   the pair's second broker: its log only (the
                                             store is STATE/activemq/data, shared)
    STATE/mongo/data/, STATE/mongo/*.log     SecantusDB store and log
    STATE/secantus-venv/                     SecantusDB's own venv (GPL: a separate process, never
                                             imported)
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.errors import PermanentError, TzpushError
from shared.settings import Settings

SERVICES: tuple[str, ...] = ("activemq", "mongo")
STANDBY = "activemq-b"  # the second broker of an active/standby pair (`services up --pair`)
BROKERS: tuple[str, ...] = ("activemq", STANDBY)
REPO_ROOT = Path(__file__).resolve().parent.parent
ACTIVEMQ_CONF = REPO_ROOT / "activemq"
ACTIVEMQ_JAR = Path("/usr/share/activemq/bin/activemq.jar")
ACTIVEMQ_HOME = Path("/usr/share/activemq")
MISSING_JARS = (Path("/usr/share/java/xstream.jar"), Path("/usr/share/java/jettison.jar"))
LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


class ServiceError(TzpushError):
    """The local stack could not be installed, started or stopped; the message says why."""


class PortTakenError(ServiceError, PermanentError):
    """A port the stack needs is used by a process we did not start."""


def check_service(name: str) -> None:
    """A ServiceError unless `name` is one of `SERVICES`."""
    if name not in (*SERVICES, STANDBY):
        raise ServiceError(f"unknown service {name!r}; one of {', '.join((*SERVICES, STANDBY))}")


@dataclass(frozen=True)
class StackConfig:
    """Where the local stack listens and keeps its files (all paths absolute)."""

    state_dir: Path
    stomp_host: str = "127.0.0.1"
    stomp_port: int = 61613
    # The pair's second broker (shares the first one's store): None = a single broker.
    stomp_port_b: int | None = None
    mongo_host: str = "127.0.0.1"
    mongo_port: int = 27017
    stomp_login: str | None = None
    stomp_passcode: str | None = None
    venv_dir: Path | None = None  # default: STATE/secantus-venv
    conf_dir: Path = ACTIVEMQ_CONF
    java_heap: str = "256m"
    # SecantusDB fsyncs its log on every commit: a write acknowledged just before a kill -9 is
    # otherwise lost (measured: up to ~2 s of acked w:1 or w:majority writes; j:true survives).
    mongo_sync_on_commit: bool = True
    # The server's test-only commands (``configureFailPoint``: a drill makes one command fail or
    # drop its connection). The test stack turns them on; never ``make run``'s stack.
    mongo_test_commands: bool = False

    @property
    def secantus_venv(self) -> Path:
        return self.venv_dir or self.state_dir / "secantus-venv"

    @property
    def pair(self) -> bool:
        return self.stomp_port_b is not None

    @property
    def brokers(self) -> tuple[str, ...]:
        """The broker services of this stack: one, or the active/standby pair."""
        return BROKERS if self.pair else BROKERS[:1]

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> StackConfig:
        """Ports and hosts from settings; refuses anything that is not a loopback address.
        Two endpoints in ``TZPUSH_STOMP__ENDPOINTS`` make an active/standby pair (one host)."""
        mongo_host, mongo_port = parse_mongo_host(settings.mongo.uri.get_secret_value())
        endpoints = settings.stomp.addresses()
        stomp_host = endpoints[0][0]
        variable = "TZPUSH_STOMP__ENDPOINTS" if settings.stomp.endpoints else "TZPUSH_STOMP__HOST"
        for host, _ in endpoints:
            if not is_loopback(host):
                raise ServiceError(
                    f"{variable} names {host!r}: the local stack only runs on loopback "
                    "(127.0.0.1); point settings at 127.0.0.1 or manage that broker yourself"
                )
        if len(endpoints) > 2 or len({h for h, _ in endpoints}) > 1:
            raise ServiceError(
                "TZPUSH_STOMP__ENDPOINTS: the local stack runs one broker or one pair, on one "
                "host (e.g. 127.0.0.1:61613,127.0.0.1:61614)"
            )
        passcode = settings.stomp.passcode
        values: dict[str, Any] = {
            "state_dir": Path(settings.local.state_dir).resolve(),
            "stomp_host": stomp_host,
            "stomp_port": endpoints[0][1],
            "stomp_port_b": endpoints[1][1] if len(endpoints) == 2 else None,
            "mongo_host": mongo_host,
            "mongo_port": mongo_port,
            "stomp_login": settings.stomp.login,
            "stomp_passcode": passcode.get_secret_value() if passcode else None,
        }
        values.update(overrides)
        return cls(**values)


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_mongo_host(uri: str) -> tuple[str, int]:
    """The one loopback host and port of a ``mongodb://`` URI, or a ServiceError saying why not."""
    if not uri.startswith("mongodb://"):
        raise ServiceError(
            "TZPUSH_MONGO__URI is not a plain mongodb:// URI: the local stack serves only "
            "mongodb://127.0.0.1:PORT/"
        )
    rest = uri[len("mongodb://") :].split("/", 1)[0].split("?", 1)[0]
    hosts = rest.rsplit("@", 1)[-1].split(",")
    if len(hosts) != 1:
        raise ServiceError("TZPUSH_MONGO__URI names several hosts: the local stack is one server")
    hostport = hosts[0]
    if hostport.startswith("["):
        host, _, tail = hostport[1:].partition("]")
        port_text = tail.lstrip(":")
    else:
        host, _, port_text = hostport.partition(":")
    try:
        port = int(port_text) if port_text else 27017
    except ValueError:
        raise ServiceError(f"TZPUSH_MONGO__URI has a bad port {port_text!r}") from None
    if not is_loopback(host):
        raise ServiceError(
            f"TZPUSH_MONGO__URI points at {host!r}: the local stack only runs on loopback "
            "(127.0.0.1); use a mongodb://127.0.0.1:PORT/ URI or manage that server yourself"
        )
    return host, port
