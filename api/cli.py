"""``tzpush api``: serve the HTTP API (FastAPI on uvicorn); ``--new-key`` makes a key.

FastAPI, uvicorn and the routes are imported inside the handler, so no other command pays for
them (tests/unit/test_cli_registry.py).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from shared.settings import Settings
from shared.terminal import command


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "api", "serve the HTTP API (users, devices, reminders, messages)", cmd_api)
    p.add_argument("--host", help="bind address (default TZPUSH_API__HOST)")
    p.add_argument("--port", type=int, help="port (default TZPUSH_API__PORT; 0: any free port)")
    p.add_argument(
        "--new-key",
        metavar="NAME",
        help="print a new random key and its TZPUSH_API__KEYS entry, then exit",
    )
    p.add_argument("--scope", choices=("app", "ops"), default="app", help="with --new-key")


def cmd_api(args: argparse.Namespace, settings: Settings) -> int:
    if args.new_key:
        return _new_key(args.new_key, args.scope)
    import uvicorn

    from api.app import create_app, open_backend
    from shared import logs

    logs.setup(settings.log_level, settings.log_json)
    host = args.host or settings.api.host
    port = settings.api.port if args.port is None else args.port
    # uvicorn stops gracefully on SIGTERM, then raises the signal again under the handler that
    # was there before it: this one, so a stop asked for ends 0 (not killed: 143), with the
    # backend closed; so does a SIGTERM while connecting.
    signal.signal(signal.SIGTERM, _stopped)
    with open_backend(settings) as backend:
        if not len(backend.keys):
            print(
                "tzpush api: no key in TZPUSH_API__KEYS: every request but /healthz, /readyz "
                "and the docs is refused (make one: tzpush api --new-key NAME)",
                file=sys.stderr,
            )
        app = create_app(backend)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,  # the root logger set up above: JSON lines when not on a TTY
            proxy_headers=True,  # believed only from settings.api.trusted_proxies
            forwarded_allow_ips=settings.api.trusted_proxies,
            server_header=False,
            timeout_graceful_shutdown=int(settings.shutdown.timeout_s) or None,
        )
        uvicorn.Server(config).run()
    return 0


def _stopped(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _new_key(name: str, scope: str) -> int:
    from pydantic import SecretStr, ValidationError

    from api.keys import hash_key, new_key
    from shared.errors import InputError
    from shared.settings import ApiKey

    try:  # the name's rule, before a key is made
        ApiKey.model_validate({"name": name, "scope": scope, "sha256": SecretStr("0" * 64)})
    except ValidationError as exc:
        raise InputError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
    key = new_key()
    entry = {"name": name, "scope": scope, "sha256": hash_key(key)}
    print(f"key (give it to the backend; it is not stored anywhere): {key}")
    print(f"settings entry (add it to the JSON list TZPUSH_API__KEYS): {json.dumps(entry)}")
    return 0
