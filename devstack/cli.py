"""The ``tzpush services ...`` and ``tzpush fake-expo`` commands (ops/cli.py maps both here).

Only the argument parsing and the handlers: the stack and the fake are libraries the tests and
the bench use without any CLI, so their modules know nothing of argparse. The handlers import
`devstack.stack`, `devstack.install` and `devstack.fake_expo` when they run, not at the top, so
that registering the commands (and running one of them) loads neither the process code nor the
HTTP server it does not use.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path

from devstack.config import ACTIVEMQ_JAR, SERVICES, STANDBY, StackConfig, check_service
from shared.errors import InputError
from shared.settings import Settings

FAKE_EXPO_DESCRIPTION = (
    "A local fake of Expo's push HTTP API, served over real HTTP, for tests, benches and demos."
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _register_services(subparsers)
    _register_fake_expo(subparsers)


# -- tzpush services -----------------------------------------------------------------------------
def _register_services(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "services",
        help="the local stack: ActiveMQ + SecantusDB",
        description="Install, start, stop and inspect the local ActiveMQ and SecantusDB "
        "(ports from TZPUSH_STOMP__PORT and TZPUSH_MONGO__URI, files under "
        "TZPUSH_LOCAL__STATE_DIR).",
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    up = sub.add_parser("up", help="install if needed, start what is not running, wait ready")
    up.add_argument("--install-only", action="store_true", help="install, start nothing")
    up.add_argument(
        "--pair",
        action="store_true",
        help="an active/standby broker pair on one store (second port: TZPUSH_STOMP__ENDPOINTS, "
        "or the first port + 1)",
    )
    up.add_argument(
        "service", nargs="*", help=f"any of {', '.join((*SERVICES, STANDBY))} (default: all)"
    )
    up.set_defaults(func=_cmd_up)
    sub.add_parser("down", help="stop what `up` started").set_defaults(func=_cmd_down)
    sub.add_parser("status", help="a table of service, pid, port, state").set_defaults(
        func=_cmd_status
    )
    sub.add_parser("install", help="apt activemq + SecantusDB venv, if missing").set_defaults(
        func=_cmd_install
    )
    rs = sub.add_parser("restart", help="stop then start one service on the same data")
    rs.add_argument("service", choices=SERVICES)
    rs.set_defaults(func=_cmd_restart)


def _cmd_install(args: argparse.Namespace, settings: Settings) -> int:
    from devstack.install import ensure_installed

    config = StackConfig.from_settings(settings)
    ensure_installed(config)
    print(f"installed: activemq ({ACTIVEMQ_JAR}), SecantusDB ({config.secantus_venv})")
    return 0


def _cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from devstack.install import ensure_installed
    from devstack.stack import LocalStack

    stack = LocalStack.from_settings(settings)
    if args.pair and not stack.config.pair:
        port_b = stack.config.stomp_port + 1
        stack = LocalStack.from_settings(settings, stomp_port_b=port_b)
        host = stack.config.stomp_host
        print(
            f"a broker pair: clients take TZPUSH_STOMP__ENDPOINTS="
            f"{host}:{stack.config.stomp_port},{host}:{port_b}"
        )
    ensure_installed(stack.config)
    if args.install_only:
        print("installed; nothing started (--install-only)")
        return 0
    names = args.service or stack.services
    for name in names:
        check_service(name)
    for name in names:
        host, port = stack.address(name)
        started = stack.start(name)
        word = "started" if started else "already running"
        if name in stack.config.brokers and stack.config.pair and stack.standby(name):
            word += ", standby"
        print(f"{name}: {word} (pid {stack.pid(name)}, {host}:{port})")
    return 0


def _cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    from devstack.stack import LocalStack

    # Only the state dir matters to `down` (pid files), so it works whatever the URIs say.
    stack = LocalStack(StackConfig(state_dir=Path(settings.local.state_dir).resolve()))
    for name, pid in stack.down().items():
        print(f"{name}: stopped (pid {pid})" if pid else f"{name}: not running")
    return 0


def _cmd_restart(args: argparse.Namespace, settings: Settings) -> int:
    from devstack.stack import LocalStack

    stack = LocalStack.from_settings(settings)
    stack.restart(args.service)
    print(f"{args.service}: restarted (pid {stack.pid(args.service)})")
    return 0


def _cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from rich.table import Table

    from devstack.stack import LocalStack
    from shared import terminal

    stack = LocalStack.from_settings(settings)
    table = Table(title=f"tzpush local stack ({stack.state_dir})")
    for column in ("service", "pid", "address", "state"):
        table.add_column(column)
    rows = stack.status()
    for row in rows:
        colour = "green" if row.state in ("running", "standby") else "yellow"
        pid = str(row.pid) if row.pid else "-"
        table.add_row(row.name, pid, f"{row.host}:{row.port}", f"[{colour}]{row.state}[/]")
    terminal.console().print(table)
    return 0 if all(r.state in ("running", "standby") for r in rows) else 3


# -- tzpush fake-expo ----------------------------------------------------------------------------
FAKE_EXPO_OPTIONS = (
    "rate_per_second",
    "receipt_delay_s",
    "error_rate",
    "latency_ms",
    "dead_at_ticket",
    "dead_at_receipt",
    "seed",
    "max_records",
    "verbose",
)
"""The command's options passed on to ``FakeExpo`` as keyword arguments of the same names."""


def _register_fake_expo(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "fake-expo",
        help="run a local fake of Expo's push API (foreground, Ctrl-C stops)",
        description=FAKE_EXPO_DESCRIPTION,
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default local.fake_expo_port)")
    p.add_argument("--access-token", default=None, help="require this bearer token")
    p.add_argument("--no-auth", action="store_true", help="ignore expo.access_token")
    # The options after --no-auth are FakeExpo's keyword arguments, by the same names (dest).
    p.add_argument(
        "--rate",
        dest="rate_per_second",
        type=float,
        default=600.0,
        help="notifications/s; 0 = unlimited",
    )
    p.add_argument(
        "--receipt-delay",
        dest="receipt_delay_s",
        type=float,
        default=1.0,
        help="seconds before receipts",
    )
    p.add_argument("--error-rate", type=float, default=0.0, help="probability of a 5xx (0..1)")
    p.add_argument("--latency-ms", type=float, default=0.0, help="added latency per API call")
    p.add_argument(
        "--dead-at-ticket",
        action="append",
        default=[],
        metavar="TOKEN",
        help="DeviceNotRegistered ticket for TOKEN (repeatable; also any token with dead-ticket)",
    )
    p.add_argument(
        "--dead-at-receipt",
        action="append",
        default=[],
        metavar="TOKEN",
        help="DeviceNotRegistered receipt for TOKEN (repeatable; also any with dead-receipt)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed for injected errors")
    p.add_argument("--max-records", type=int, default=200_000, help="pushes/receipts kept")
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.set_defaults(func=_cmd_fake_expo)


def _cmd_fake_expo(args: argparse.Namespace, settings: Settings) -> int:
    from devstack.fake_expo import FakeExpo

    token = args.access_token
    if token is None and not args.no_auth and settings.expo.access_token is not None:
        token = settings.expo.access_token.get_secret_value()
    if args.rate_per_second < 0 or not 0 <= args.error_rate <= 1 or args.latency_ms < 0:
        raise InputError("--rate and --latency-ms must be >= 0, --error-rate within 0..1")
    if args.receipt_delay_s < 0 or args.max_records < 1:
        raise InputError("--receipt-delay must be >= 0 and --max-records >= 1")
    port = args.port if args.port is not None else settings.local.fake_expo_port
    options = {name: getattr(args, name) for name in FAKE_EXPO_OPTIONS}
    fake = FakeExpo(args.host, port, access_token=token, **options)
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        try:
            fake.start()
        except OSError as exc:  # the port taken (a demo running), or not ours to bind
            raise InputError(
                f"cannot listen on {args.host}:{fake.port} ({exc.strerror or exc}); pick "
                "another with --port (and point TZPUSH_EXPO__BASE_URL at it)"
            ) from None
        auth = "bearer token required" if token else "no auth"
        print(f"fake Expo listening on {fake.url} ({auth}, {args.rate_per_second:g}/s)", flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        fake.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"fake Expo stopped: {json.dumps(fake.stats())}", flush=True)
    return 0
