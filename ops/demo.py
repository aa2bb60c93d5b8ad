"""``tzpush demo`` (``make run``): the whole pipeline on the local stack, watched live.

Starts what is missing (ActiveMQ + SecantusDB via ``LocalStack``, stopping at the end only what
it started), an in-process Expo fake with one dead device, and the creator, a consumer and the
receipts poller as threads of this process (threads stop cleanly on Ctrl-C). Seeds ~20 users in
8 zones (Tashkent, Berlin, New York, Sydney, Kathmandu at +5:45, Chatham at +12:45/+13:45...)
with reminders at the local minute that falls 1 to 3 minutes from now, then changes two users'
minds after planning so cancellations show up with their reasons. Works in its own database
(``tzpush_demo``, wiped at start) and its own queue prefix, so it never touches real data.

It also runs ``tzpush api`` (a child process on the demo's database and queues, on settings'
``api.host``/``api.port``, another free port when that one is taken) with a fresh key made by
``tzpush api --new-key``, prints a curl line that works as it stands and the URL of ``/docs``,
and stops it with everything else.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
import uuid
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from pymongo.database import Database
from pymongo.errors import PyMongoError
from rich.console import Console
from rich.live import Live

from devstack.config import SERVICES, PortTakenError
from devstack.fake_expo import FakeExpo
from devstack.fake_expo_api import DEAD_AT_RECEIPT_MARK
from devstack.install import ensure_installed
from devstack.stack import LocalStack
from ops.demo_api import show_api, start_api
from ops.demo_view import PlainLog, Snapshot, render, take
from shared import terminal
from shared.domain.messages import Status
from shared.errors import TransientError, TzpushError
from shared.settings import Settings
from shared.store import db as dbm
from shared.store.fleet import FleetShare
from shared.store.mongo import reads

log = logging.getLogger(__name__)

ZONES = (
    "Asia/Tashkent",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "America/Los_Angeles",
    "Asia/Tokyo",
)
PLAN = (  # (category, label, title) per reminder, cycled over users
    ("meal", "lunch", "Time for lunch"),
    ("medication", "pill", "Take your pill"),
    ("mood", "check-in", "How are you feeling?"),
    ("activity", "walk", "A short walk?"),
    ("safety", "check", "Safety check"),
)
DEAD_USER = "u07"
DISABLES_CATEGORY = "u03"  # turns off its reminder's category after planning
REMOVES_REMINDER = "u05"  # removes its reminder after planning
DEMO_CONSUMER = "demo-consumer"


@dataclass
class DemoOptions:
    duration: float | None = None  # seconds; None = until Ctrl-C (or --until-done)
    database: str = "tzpush_demo"
    fake_port: int | None = None  # None = settings.local.fake_expo_port; 0 = any free port
    users: int = 20
    minutes: int = 3  # reminders fall on this many consecutive whole minutes
    min_lead_s: float = 40.0  # the first is at least this far ahead (planning + lead)
    until_done: bool = False  # stop once nothing is pending and every receipt is checked
    services: bool = True  # start the local stack if it is not running
    live: bool | None = None  # None = a live view on a TTY, plain lines otherwise
    summary_json: str | None = None
    api: bool = True  # also serve the HTTP API (a `tzpush api` child process)
    api_port: int | None = None  # None = settings.api.port; taken = any free port


def demo_settings(settings: Settings, opts: DemoOptions) -> Settings:
    """The demo's own database and queue prefix, fast receipts, a pass every 30 s, 15 min ahead."""
    return settings.model_copy(
        update={
            "mongo": settings.mongo.model_copy(update={"database": opts.database}),
            "stomp": settings.stomp.model_copy(
                update={"queue_prefix": f"tzpush-demo-{uuid.uuid4().hex[:6]}"}
            ),
            # A short horizon: later passes must not plan tomorrow's occurrences into the view.
            "creator": settings.creator.model_copy(
                update={"interval_seconds": 30, "horizon_hours": 0.25}
            ),
            "consumer": settings.consumer.model_copy(update={"receipts_interval_s": 2.0}),
            "outcomes": settings.outcomes.model_copy(update={"receipts_delay_s": 10.0}),
        }
    )


def due_minutes(now: dt.datetime, opts: DemoOptions) -> list[dt.datetime]:
    """Whole UTC minutes, the first at least ``min_lead_s`` ahead (every zone's minute is one)."""
    first = (now + dt.timedelta(seconds=opts.min_lead_s + 59.999)).replace(second=0, microsecond=0)
    return [first + dt.timedelta(minutes=k) for k in range(opts.minutes)]


def seed(manager: Any, dues: list[dt.datetime], n_users: int) -> list[str]:
    """Users, one token each (one dead device), one or two reminders at a due local minute."""
    reminder_ids = []
    for i in range(n_users):
        uid, zone = f"u{i:02d}", ZONES[i % len(ZONES)]
        manager.upsert_user(uid, timezone=zone)
        mark = f"{DEAD_AT_RECEIPT_MARK}-" if uid == DEAD_USER else ""
        manager.register_token(uid, device=f"phone-{uid}", token=f"ExponentPushToken[{mark}{uid}]")
        for k in range(1 + (i % 4 == 0)):
            cat, label, title = PLAN[(i + k) % len(PLAN)]
            due = dues[(i + k) % len(dues)]
            at = due.astimezone(ZoneInfo(zone))
            r = manager.add_reminder(
                uid, category=cat, label=label, at=at.strftime("%H:%M"), title=title
            )
            reminder_ids.append(r["_id"])
    return reminder_ids


def _start_stack(settings: Settings, console: Console, cleanup: ExitStack) -> list[str]:
    """Start what is not running; each service started is stopped by ``cleanup`` (the ones
    started before a failure too)."""
    stack = LocalStack.from_settings(settings)
    ensure_installed(stack.config)
    started: list[str] = []
    for name in SERVICES:
        try:
            if stack.start(name):
                started.append(name)
                cleanup.callback(stack.stop, name)
        except PortTakenError:
            if not stack.ready(name):
                raise
            host, port = stack.address(name)
            console.print(f"using the {name} already listening on {host}:{port}")
    return started


def run_demo(base: Settings, opts: DemoOptions) -> dict[str, Any]:
    """Run the demo; returns (and prints) the summary.

    Everything it starts is stopped on the way out, whatever failed: each step of the cleanup
    is registered as its resource is made (``ExitStack``), and runs even if one before it
    raised. The database or the broker going away (``tzpush services down`` elsewhere) ends
    the demo with one line saying so, not a traceback, and a non-zero exit."""
    from consumer.receipts import ReceiptPoller
    from consumer.worker import Consumer
    from creator.manage import Manager
    from creator.planner import Planner
    from shared import metrics
    from shared.broker import StompClient
    from shared.expo.sender import ExpoSender

    console: Console = terminal.console()  # piped: no line is wrapped
    live = console.is_terminal if opts.live is None else opts.live
    settings = demo_settings(base, opts)
    snap: Snapshot | None = None
    with ExitStack() as cleanup:
        started = _start_stack(settings, console, cleanup) if opts.services else []
        port = settings.local.fake_expo_port if opts.fake_port is None else opts.fake_port
        try:
            fake = FakeExpo("127.0.0.1", port, receipt_delay_s=3.0, rate_per_second=600).start()
        except OSError as exc:
            console.print(f"fake Expo port {port} unavailable ({exc}); using a free port")
            fake = FakeExpo("127.0.0.1", 0, receipt_delay_s=3.0, rate_per_second=600).start()
        cleanup.callback(fake.stop)
        settings = settings.model_copy(
            update={"expo": settings.expo.model_copy(update={"base_url": fake.url})}
        )
        try:
            database = dbm.connect(settings.mongo)
            cleanup.callback(database.client.close)
            database.client.drop_database(opts.database)
            dbm.ensure_indexes(database)
            broker = StompClient(settings).connect()
            cleanup.callback(broker.close)
            stop = threading.Event()
            threads: list[threading.Thread] = []
            # Registered as a live sender before the first request, as `tzpush consumer` does:
            # Expo's rate is shared by every live sender, and the console's "live consumers"
            # reads the registry.
            fleet = FleetShare(
                database,
                DEMO_CONSUMER,
                settings.expo.rate_per_second,
                kind="consumer",
                categories=settings.categories,
            ).start()
            cleanup.callback(fleet.stop)
            sender = ExpoSender(settings.expo, on_event=metrics.expo_event, rate_share=fleet.rate)
            cleanup.callback(sender.close)
            consumer = Consumer(settings, database, sender, consumer_id=DEMO_CONSUMER)
            cleanup.callback(_join, threads)
            cleanup.callback(stop.set)
            cleanup.callback(consumer.stop)
            if opts.api:
                api = start_api(settings, opts.api_port, console)  # starts while the demo seeds
                cleanup.callback(api.stop)
            else:
                api = None
            planner = Planner(database, broker, settings)
            manager = Manager(database, planner, settings)
            dues = due_minutes(planner.clock(), opts)
            reminder_ids = seed(manager, dues, opts.users)
            report = planner.run_pass()
            where = (
                f"fake Expo at {fake.url}; database {opts.database!r} emptied at start "
                "(the demo's own: every run starts from nothing)"
            )
            console.print(f"{where}; {report.summary()}")
            show_api(api, console, "u00")
            # Changes of mind after planning: both show up as cancellations with their reasons.
            r3 = reads.a_reminder_of(database, DISABLES_CATEGORY) or {}
            manager.upsert_user(DISABLES_CATEGORY, categories={r3.get("category", "meal"): False})
            r5 = reads.a_reminder_of(database, REMOVES_REMINDER) or {}
            if r5:
                manager.remove_reminder(r5["_id"])

            def creator_loop() -> None:
                while not stop.wait(settings.creator.interval_seconds):
                    try:
                        if not broker.connected:  # as the creator service does before each pass
                            broker.connect()
                        planner.run_pass()
                    except (TzpushError, PyMongoError) as exc:  # an outage: said, not a trace
                        log.warning("demo planning pass failed: %s", exc)
                    except Exception:
                        log.exception("demo planning pass failed")

            receipts = ReceiptPoller(settings, database, sender)
            for target, name in (
                (consumer.run, DEMO_CONSUMER),
                (lambda: receipts.run(stop), "demo-receipts"),
                (creator_loop, "demo-creator"),
            ):
                threads.append(threading.Thread(target=target, name=name, daemon=True))
                threads[-1].start()
            title = f"tzpush demo: {len(reminder_ids)} reminders"
            plain = PlainLog(console)
            with suppress(KeyboardInterrupt):  # Ctrl-C: the summary, then everything stops
                _watch(database, fake, opts, live, console, title, plain)
            snap = take(database, fake)
            if not live:  # what ended since the last look has its line too
                plain.update(snap)
        except PyMongoError as exc:
            raise TransientError(
                f"the demo's database went away ({_first_line(exc)}); was `tzpush services "
                "down` run elsewhere? Everything the demo started is stopped"
            ) from None
    assert snap is not None
    summary = snap.summary()
    summary["stopped_services"] = started
    _print_summary(console, summary)
    if opts.summary_json:
        with open(opts.summary_json, "w") as fh:
            json.dump(summary, fh, indent=2, default=str)
    return summary


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(timeout=30)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def _watch(
    db: Database[dict[str, Any]],
    fake: FakeExpo,
    opts: DemoOptions,
    live: bool,
    console: Console,
    title: str,
    plain: PlainLog,
) -> None:
    """Poll every 0.5 s and show; return at the deadline or when everything has ended."""
    deadline = time.monotonic() + opts.duration if opts.duration else None

    def done(snap: Snapshot) -> bool:
        if deadline is not None and time.monotonic() >= deadline:
            return True
        busy = {Status.PENDING, Status.REPLAYING} & set(snap.counts)
        unchecked = any((m.get("receipt") or {}).get("state") == "pending" for m in snap.messages)
        return opts.until_done and bool(snap.pushes) and not busy and not unchecked

    if live:
        with Live(render(take(db, fake), title), console=console, refresh_per_second=4) as view:
            while True:
                snap = take(db, fake)
                view.update(render(snap, title))
                if done(snap):
                    return
                time.sleep(0.5)
    while True:
        snap = take(db, fake)
        plain.update(snap)
        if done(snap):
            return
        time.sleep(0.5)


def _print_summary(console: Console, s: dict[str, Any]) -> None:
    lat = s["lateness_ms"]
    console.print(
        "summary: "
        + ", ".join(f"{k} {v}" for k, v in s["messages"].items())
        + f"; {len(s['deliveries'])} pushes received by the fake, "
        + (f"lateness p50 {lat['p50']} ms, max {lat['max']} ms" if s["deliveries"] else "none yet")
        + f"; {len(s['deactivated'])} token(s) deactivated",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    for e in s["ended"]:
        line = f"  {e['status']} {e['user']}: {e['reason']}"
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if s["stopped_services"]:
        console.print("stopped what the demo started: " + ", ".join(s["stopped_services"]))
