"""Commands: ``tzpush consumer`` and ``tzpush receipts``."""

from __future__ import annotations

import argparse
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from consumer.worker import Consumer
from shared import logs, metrics
from shared.errors import InputError
from shared.expo.pushes import (
    OutgoingPush,
    PreparedPush,
    PushOutcome,
    Sender,
)
from shared.lifecycle import stop_on_signals
from shared.settings import ExpoSettings, Settings
from shared.store import db as dbm
from shared.store.fleet import FleetShare, consumer_alerts, live_consumers
from shared.store.server_time import ServerTime

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("consumer", help="send armed messages at their due instant")
    p.add_argument("--categories", help="comma-separated (default: every configured category)")
    p.add_argument(
        "--burst",
        action="store_true",
        help="drain the wake-ups the broker has already delivered, then exit (wake-ups "
        "scheduled for later stay on the broker and arrive at their time)",
    )
    p.add_argument("--idle-seconds", type=float, default=2.0, help="burst: exit after this idle")
    p.set_defaults(func=cmd_consumer)
    r = sub.add_parser("receipts", help="poll Expo receipts and keep tokens clean")
    r.add_argument("--once", action="store_true", help="one poll of what is due, then exit")
    r.set_defaults(func=cmd_receipts)


def parse_categories(raw: str | None, settings: Settings) -> list[str]:
    if not raw:
        return list(settings.categories)
    cats = [c.strip() for c in raw.split(",") if c.strip()]
    bad = [c for c in cats if c not in settings.categories]
    if bad:
        raise InputError(
            f"unknown categor{'y' if len(bad) == 1 else 'ies'} {', '.join(bad)} "
            f"(configured: {', '.join(settings.categories)})"
        )
    return cats


class BackgroundSender:
    """The Expo sender, imported and built on a thread while the consumer connects.

    ``shared.expo.sender`` pulls in requests and the Expo SDK, a good part of a consumer's
    start-up; a consumer restarted after an outage first subscribes, checks and claims (mostly
    waiting on the database), and only then needs the sender, so the import runs meanwhile.
    """

    def __init__(self, settings: ExpoSettings, rate_share: Callable[[], float]) -> None:
        self._future: Future[Sender] = Future()
        threading.Thread(
            target=self._build, args=(settings, rate_share), name="expo-import", daemon=True
        ).start()

    def _build(self, settings: ExpoSettings, rate_share: Callable[[], float]) -> None:
        try:
            from shared.expo.sender import ExpoSender

            sender = ExpoSender(settings, on_event=metrics.expo_event, rate_share=rate_share)
            self._future.set_result(sender)
        except BaseException as exc:  # handed to whoever uses the sender first
            self._future.set_exception(exc)

    def prepare(self, pushes: Sequence[OutgoingPush]) -> list[PreparedPush]:
        return self._future.result().prepare(pushes)

    def send(self, *args: Any, **kwargs: Any) -> list[PushOutcome]:
        return self._future.result().send(*args, **kwargs)

    def close(self) -> None:
        if self._future.exception() is None:
            self._future.result().close()


def cmd_consumer(args: argparse.Namespace, settings: Settings) -> int:
    logs.setup(settings.log_level, settings.log_json)
    cats = parse_categories(args.categories, settings)
    database = dbm.connect(settings.mongo)
    dbm.ensure_indexes(database, trust_marker=True)
    consumer_id = f"consumer-{uuid.uuid4().hex[:8]}"
    # Registered before the first request: Expo's rate is shared by every live sender.
    fleet = FleetShare(
        database, consumer_id, settings.expo.rate_per_second, kind="consumer", categories=cats
    ).start()
    sender = BackgroundSender(settings.expo, fleet.rate)
    # Due instants are held by the database server's clock, which every process shares: a host
    # whose clock runs ahead would otherwise send early (chaos seed 16, docs/notes/races.md).
    consumer = Consumer(
        settings,
        database,
        sender,
        categories=cats,
        consumer_id=consumer_id,
        clock=ServerTime(database),
    )

    def health() -> dict[str, str | None]:
        out: dict[str, str | None] = {"database": None, "broker": None}
        try:
            database.client.admin.command("ping")
        except Exception as exc:
            out["database"] = f"unreachable: {exc}"
        if not consumer.link.connected():
            out["broker"] = "not connected"
        return out

    if not args.burst:
        metrics.serve(
            settings.metrics.host,
            metrics.metrics_port(settings.metrics, "consumer"),
            health,
            lambda: consumer_alerts(database, settings.categories),
            consumers=lambda: live_consumers(database, settings.categories),
            grace={c: settings.grace_seconds(c) for c in cats},
        )
    stop_on_signals(consumer.stop, settings.shutdown.timeout_s)
    try:
        return consumer.run(burst=args.burst, idle_s=args.idle_seconds)
    finally:
        fleet.stop()
        sender.close()
        database.client.close()


def cmd_receipts(args: argparse.Namespace, settings: Settings) -> int:
    from consumer.receipts import ReceiptPoller  # not on the consumer's start-up path
    from shared.expo.sender import ExpoSender

    logs.setup(settings.log_level, settings.log_json)
    database = dbm.connect(settings.mongo)
    dbm.ensure_indexes(database)
    sender = ExpoSender(settings.expo, on_event=metrics.expo_event)
    poller = ReceiptPoller(settings, database, sender)
    try:
        if args.once:
            counts = poller.poll_once()
            print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "no receipts due")
            return 0
        stop = threading.Event()
        stop_on_signals(stop.set, settings.shutdown.timeout_s)

        def health() -> dict[str, str | None]:
            try:
                database.client.admin.command("ping")
                return {"database": None}
            except Exception as exc:
                return {"database": f"unreachable: {exc}"}

        port = metrics.metrics_port(settings.metrics, "receipts")
        metrics.serve(settings.metrics.host, port, health)
        poller.run(stop)
        return 0
    finally:
        sender.close()
        database.client.close()
