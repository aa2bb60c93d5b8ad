"""Wiring for the creator: database, broker and planner from settings, and the service loop.

The service runs a planning pass at start and then every ``creator.interval_seconds`` under
APScheduler (one pass at a time, missed runs coalesced). SIGTERM/SIGINT stop it between passes.

Partitions (``shared/store/partitions.py``): a creator registers, waits one heartbeat so that
creators started together see each other, then holds its share. A heartbeat thread renews the
leases every third of ``lease_seconds`` and rebalances; when it takes partitions (a creator died
or left) it runs a pass at once, so a dead creator's partitions are planned within one lease
plus one heartbeat. A clean stop gives the partitions back at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
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
from shared.store.fleet import consumer_alerts, live_consumers

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
    """A ``Manager`` on a connected planner (``open_planner``); closes its connections on exit."""
    with open_planner(settings) as planner:
        yield Manager(planner.db, planner, settings)


def health(planner: Planner) -> dict[str, str | None]:
    """The creator's ``/healthz`` checks: ``database`` and ``broker``, each None when fine, else
    what is wrong."""
    out: dict[str, str | None] = {"database": None, "broker": None}
    try:
        planner.db.client.admin.command("ping")
    except Exception as exc:
        out["database"] = f"unreachable: {exc}"
    if planner.broker is None or not planner.broker.connected:
        out["broker"] = "not connected"
    return out


def heartbeat_s(settings: Settings) -> float:
    """How often a creator renews its leases: a third of the lease."""
    return settings.creator.lease_seconds / 3


def join_fleet(
    planner: Planner, stop: threading.Event | None = None, *, wait_alone: bool = False
) -> None:
    """Register; when other creators are alive, wait one heartbeat (or until ``stop``) so that
    they see this one and give it its share before its first pass, and log that wait. Alone,
    return at once (``tzpush creator --once``), unless ``wait_alone``: the service waits all
    the same, so that creators started together share from their first pass and a SIGTERM
    soon after the start ends that wait rather than a pass."""
    now = planner.clock()
    planner.membership.register(now)
    others = planner.membership.others_live(now)
    if not others and not wait_alone:
        return
    wait_s = heartbeat_s(planner.settings)
    log.info(
        "joining %d other creator(s): waiting %.0f s (one heartbeat) so they give this one its "
        "share of the partitions before its first pass",
        len(others),
        wait_s,
    )
    (stop or threading.Event()).wait(wait_s)


def run_once(settings: Settings) -> str:
    """``tzpush creator --once``: this creator's share of the partitions, planned once (all of
    them when no other creator runs), then given back."""
    with open_planner(settings) as planner:
        join_fleet(planner)
        report = planner.run_pass()
    return "\n".join([report.summary(), *(f"note: {n}" for n in report.notes)])


def run_service(settings: Settings, stop: threading.Event | None = None) -> int:
    """Run planning passes forever (until SIGTERM/SIGINT or ``stop``)."""
    stop = stop or threading.Event()
    with open_planner(settings) as planner:
        planner.keep_leases = True
        metrics.serve(
            settings.metrics.host,
            metrics.metrics_port(settings.metrics, "creator"),
            lambda: health(planner),
            lambda: consumer_alerts(planner.db, settings.categories),
            consumers=lambda: live_consumers(planner.db, settings.categories),
        )
        metrics.PLAN_INTERVAL.set(settings.creator.interval_seconds)
        metrics.PLAN_LAST_SUCCESS.set_to_current_time()  # "overdue" counts from the start
        sched = BlockingScheduler(timezone="UTC")

        gained = threading.Event()  # partitions taken while a pass ran: plan them right after

        def one_pass() -> None:
            while True:
                gained.clear()
                try:
                    if planner.broker is not None and not planner.broker.connected:
                        planner.broker.connect()
                    with metrics.PLAN_SECONDS.time():
                        report = planner.run_pass()
                    metrics.PLANNED.inc(report.inserted)
                    metrics.MISSED_BY_JANITOR.inc(report.missed)
                    metrics.PLAN_LAST_SUCCESS.set_to_current_time()
                    log.info("planning pass: %s", report.summary())
                except TransientError as exc:
                    metrics.PLAN_FAILURES.inc()
                    log.warning("planning pass failed, retried next time: %s", exc)
                except Exception:
                    metrics.PLAN_FAILURES.inc()
                    log.exception("planning pass failed")
                if not gained.is_set() or stop.is_set():
                    return

        def heartbeat() -> None:
            # Renew, rebalance; a pass at once when partitions were taken (a creator died).
            while not stop.wait(heartbeat_s(settings)):
                try:
                    before = set(planner.membership.held)
                    taken = planner.membership.sync(planner.clock()) - before
                except Exception as exc:  # the database away: the leases run out, others plan
                    log.warning("creator heartbeat failed: %s", exc)
                    continue
                if taken:
                    log.info("took partitions %s: planning them now", sorted(taken))
                    gained.set()  # a pass running now runs again once it ends
                    with contextlib.suppress(Exception):  # an idle scheduler runs one now
                        sched.modify_job("plan", next_run_time=dt.datetime.now(dt.UTC))

        def _stop() -> None:
            stop.set()
            with contextlib.suppress(Exception):  # not started yet: nothing to shut down
                sched.shutdown(wait=False)

        # Signals are taken before the fleet is joined (a wait of one heartbeat): a SIGTERM
        # then ends the wait and the process exits 0, instead of dying by the signal.
        stop_on_signals(_stop, settings.shutdown.timeout_s)
        log.info(
            "creator running (%s): a pass every %d s, %d partitions, lease %.0f s",
            planner.membership.me,
            settings.creator.interval_seconds,
            settings.creator.partitions,
            settings.creator.lease_seconds,
        )
        join_fleet(planner, stop, wait_alone=True)
        if stop.is_set():
            with contextlib.suppress(Exception):
                planner.membership.leave()
            return 0
        sched.add_job(
            one_pass,
            "interval",
            seconds=settings.creator.interval_seconds,
            max_instances=1,
            coalesce=True,
            next_run_time=planner.clock(),
            id="plan",
        )
        beat = threading.Thread(target=heartbeat, name="creator-heartbeat", daemon=True)
        beat.start()
        try:
            sched.start()
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                planner.membership.leave()
    return 0
