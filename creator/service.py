"""Wiring for the creator: database, broker and planner from settings, and the service loop.

The service runs a planning pass at start and then every ``creator.interval_seconds`` under
APScheduler (one pass at a time, missed runs coalesced). SIGTERM/SIGINT stop it between passes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

from apscheduler.schedulers.blocking import BlockingScheduler

from creator.manage import Manager
from creator.planner import Planner
from shared import metrics
from shared.broker import StompClient
from shared.errors import TransientError
from shared.lifecycle import stop_on_signals
from shared.settings import Settings
from shared.store import db as dbm
from shared.store.fleet import consumer_alerts

log = logging.getLogger(__name__)


@contextlib.contextmanager
def open_planner(settings: Settings, *, broker: bool = True) -> Iterator[Planner]:
    """A connected planner (indexes ensured); closes its connections on exit."""
    database = dbm.connect(settings.mongo)
    dbm.ensure_indexes(database)
    client = StompClient(settings).connect() if broker else None
    try:
        planner = Planner(database, client, settings)
        planner.on_armed = lambda n: metrics.ARMED.inc(n)
        yield planner
    finally:
        if client is not None:
            client.close()
        database.client.close()


@contextlib.contextmanager
def open_manager(settings: Settings) -> Iterator[Manager]:
    with open_planner(settings) as planner:
        yield Manager(planner.db, planner, settings)


def health(planner: Planner) -> dict[str, str | None]:
    out: dict[str, str | None] = {"database": None, "broker": None}
    try:
        planner.db.client.admin.command("ping")
    except Exception as exc:
        out["database"] = f"unreachable: {exc}"
    if planner.broker is None or not planner.broker.connected:
        out["broker"] = "not connected"
    return out


def run_service(settings: Settings, stop: threading.Event | None = None) -> int:
    """Run planning passes forever (until SIGTERM/SIGINT or ``stop``)."""
    stop = stop or threading.Event()
    with open_planner(settings) as planner:
        metrics.serve(
            settings.metrics.host,
            settings.metrics.port,
            lambda: health(planner),
            lambda: consumer_alerts(planner.db, settings.categories),
        )
        sched = BlockingScheduler(timezone="UTC")

        def one_pass() -> None:
            try:
                if planner.broker is not None and not planner.broker.connected:
                    planner.broker.connect()
                with metrics.PLAN_SECONDS.time():
                    report = planner.run_pass()
                metrics.PLANNED.inc(report.inserted)
                metrics.MISSED_BY_JANITOR.inc(report.missed)
                log.info("planning pass: %s", report.summary())
            except TransientError as exc:
                log.warning("planning pass failed, retried next time: %s", exc)
            except Exception:
                log.exception("planning pass failed")

        sched.add_job(
            one_pass,
            "interval",
            seconds=settings.creator.interval_seconds,
            max_instances=1,
            coalesce=True,
            next_run_time=planner.clock(),
            id="plan",
        )

        def _stop() -> None:
            stop.set()
            sched.shutdown(wait=False)

        stop_on_signals(_stop, settings.consumer.shutdown_timeout_s)
        log.info("creator running: a pass every %d s", settings.creator.interval_seconds)
        sched.start()
    return 0
