"""``tzpush demo``: the whole pipeline on the local stack, watched live."""

from __future__ import annotations

import argparse
from typing import Any

from shared.settings import Settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the command and its options to ``sub``."""
    p = sub.add_parser("demo", help="the whole pipeline on the local stack, watched live")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--until-done", action="store_true", help="stop when everything has ended")
    p.add_argument("--database", default="tzpush_demo", help="demo database (wiped at start)")
    p.add_argument("--fake-port", type=int, help="Expo fake port (default local.fake_expo_port)")
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--minutes", type=int, default=3, help="reminders spread over N minutes")
    p.add_argument("--min-lead", type=float, default=40.0, help="first due at least N s ahead")
    p.add_argument("--no-services", action="store_true", help="use an already running stack")
    p.add_argument("--plain", action="store_true", help="log lines instead of the live view")
    p.add_argument("--summary-json", help="also write the summary to this file")
    p.add_argument("--no-api", action="store_true", help="do not start the HTTP API")
    p.add_argument("--api-port", type=int, help="API port (default TZPUSH_API__PORT)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    """Runs the demo until its duration, until done, or until Ctrl-C or SIGTERM; returns 0."""
    import signal

    from shared import logs

    def _interrupt(*_: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the demo as Ctrl-C does: cleanly, with a summary

    signal.signal(signal.SIGTERM, _interrupt)
    logs.setup("WARNING", False)
    from ops.demo import DemoOptions, run_demo

    opts = DemoOptions(
        duration=args.duration,
        database=args.database,
        fake_port=args.fake_port,
        users=args.users,
        minutes=max(1, args.minutes),
        min_lead_s=args.min_lead,
        until_done=args.until_done,
        services=not args.no_services,
        live=False if args.plain else None,
        summary_json=args.summary_json,
        api=not args.no_api,
        api_port=args.api_port,
    )
    run_demo(settings, opts)
    return 0
