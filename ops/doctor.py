"""``tzpush doctor``: check every setting and connection, and say what to fix.

Each check answers one question an operator would otherwise debug by hand: are the settings
consistent, is the database reachable with every index, is the broker reachable *and does it
really delay scheduled messages* (without ``schedulerSupport`` ActiveMQ silently delivers
``AMQ_SCHEDULED_DELAY`` messages at once, so every push would go out early), is Expo reachable
and does it accept the access token, and how far is this host's clock from the database
server's (the janitor goes by the database's clock; consumers hold pushes until the due instant
by their own, and the intent-change log allows 30 s between processes), and which stored
documents the services skip as bad (the rules of ``shared.domain.validation``, the same the
planner, janitor, receipts poller and consumer apply). A failed check names the setting or file
to change.
"""

from __future__ import annotations

import datetime as dt
import queue
import time
import uuid
from collections.abc import Callable

import requests

from ops.doctor_db import (
    Check,
    check_clock,
    check_database,
    check_documents,
    check_expo_errors,
    find_bad_documents,
)
from shared.broker import Frame, StompClient
from shared.clock import Clock, utcnow
from shared.errors import TzpushError
from shared.settings import Settings

__all__ = [
    "Check",
    "check_broker",
    "check_clock",
    "check_database",
    "check_documents",
    "check_expo",
    "check_expo_errors",
    "check_settings",
    "find_bad_documents",
    "render",
    "run_checks",
]

PROBE_DELAY_MS = 1500
TOO_EARLY_S = 1.2
PROBE_TIMEOUT_S = 10.0
SKEW_OK_S = 1.0  # above this, pushes leave this much early or late: warn
SCAN_LIMIT = 20_000  # documents read per kind when looking for bad ones
LIST_BAD = 20  # bad documents named in the check's detail (all are counted)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def check_settings(settings: Settings) -> list[Check]:
    """Settings that load but cannot work together."""
    out: list[Check] = []
    c, lead = settings.creator, settings.wakeup.lead_seconds
    for name, cat in settings.categories.items():
        if cat.grace_seconds <= lead:
            out.append(
                Check(
                    f"category {name}",
                    "fail",
                    f"grace {cat.grace_seconds} s <= wake-up lead {lead:g} s",
                    f"raise TZPUSH_CATEGORIES grace of {name} above TZPUSH_WAKEUP__LEAD_SECONDS",
                )
            )
    if not out:
        graces = ", ".join(f"{k} {v.grace_seconds}s" for k, v in settings.categories.items())
        out.append(Check("categories", "ok", f"grace > lead {lead:g} s: {graces}"))
    if c.interval_seconds >= c.horizon_hours * 3600:
        out.append(
            Check(
                "creator",
                "fail",
                f"pass every {c.interval_seconds} s but plans only {c.horizon_hours:g} h ahead",
                "lower TZPUSH_CREATOR__INTERVAL_SECONDS or raise TZPUSH_CREATOR__HORIZON_HOURS",
            )
        )
    r, delay = settings.consumer, settings.outcomes.receipts_delay_s
    if delay >= r.receipts_give_up_s:
        out.append(
            Check(
                "receipts",
                "fail",
                f"poll after {delay:g} s but give up after {r.receipts_give_up_s:g} s",
                "TZPUSH_OUTCOMES__RECEIPTS_DELAY_S must be below "
                "TZPUSH_CONSUMER__RECEIPTS_GIVE_UP_S",
            )
        )
    if "exp.host" in settings.expo.base_url and settings.expo.rate_per_second > 600:
        out.append(
            Check(
                "expo rate",
                "warn",
                f"{settings.expo.rate_per_second:g}/s per sender exceeds Expo's 600/s",
                "set TZPUSH_EXPO__RATE_PER_SECOND to 600 / number of senders",
            )
        )
    return out


def check_broker(settings: Settings, timeout_s: float = PROBE_TIMEOUT_S) -> list[Check]:
    """Connect, then prove scheduled delivery: a 1.5 s delayed probe must not arrive early."""
    s = settings.stomp
    inbox: queue.Queue[Frame] = queue.Queue()
    client = StompClient(settings, inbox=inbox)
    try:
        client.connect()
    except TzpushError as exc:
        return [
            Check(
                "broker",
                "fail",
                str(exc)[:200],
                "start it (`tzpush services up`) or fix TZPUSH_STOMP__HOST/PORT/LOGIN/PASSCODE",
            )
        ]
    try:
        host, port = client.endpoint or (s.host, s.port)
        detail = f"STOMP CONNECTED at {host}:{port}"
        if len(client.endpoints) > 1:
            position = client.endpoints.index((host, port)) + 1
            detail += f" (endpoint {position} of {len(client.endpoints)}: the active one)"
        out = [Check("broker", "ok", detail)]
        dest = f"/queue/{s.queue_prefix}.doctor.{uuid.uuid4().hex[:12]}"
        client.subscribe(dest, prefetch=1)
        sent = time.monotonic()
        client.send(dest, b'{"probe": true}', delay_ms=PROBE_DELAY_MS, receipt=True)
        try:
            frame = inbox.get(timeout=timeout_s)
        except queue.Empty:
            out.append(
                Check(
                    "scheduled delivery",
                    "fail",
                    f"a {PROBE_DELAY_MS} ms delayed probe did not arrive within {timeout_s:g} s",
                    "check the broker log (scheduler store full? jobSchedulerUsage limit)",
                )
            )
            return out
        took = time.monotonic() - sent
        client.ack(frame)
        if took < TOO_EARLY_S:
            out.append(
                Check(
                    "scheduled delivery",
                    "fail",
                    f"a {PROBE_DELAY_MS} ms delayed probe arrived after {took:.2f} s: "
                    "AMQ_SCHEDULED_DELAY is ignored (schedulerSupport is off)",
                    'set schedulerSupport="true" on <broker> in activemq.xml and restart it',
                )
            )
        else:
            out.append(
                Check("scheduled delivery", "ok", f"{PROBE_DELAY_MS} ms probe after {took:.2f} s")
            )
        return out
    finally:
        client.close()


def check_expo(settings: Settings) -> list[Check]:
    """POST getReceipts for a nonsense id with the configured Bearer: 200 = reachable + accepted."""
    url = f"{settings.expo.base_url}/--/api/v2/push/getReceipts"
    headers = {"accept": "application/json", "content-type": "application/json"}
    if settings.expo.access_token is not None:
        headers["Authorization"] = f"Bearer {settings.expo.access_token.get_secret_value()}"
    try:
        resp = requests.post(
            url,
            json={"ids": ["00000000-0000-0000-0000-000000000000"]},
            headers=headers,
            timeout=min(settings.expo.timeout_s, 10.0),
        )
    except requests.RequestException as exc:
        return [
            Check(
                "expo",
                "fail",
                f"unreachable: {type(exc).__name__}",
                f"fix TZPUSH_EXPO__BASE_URL ({settings.expo.base_url}) or start the fake",
            )
        ]
    if resp.status_code == 401:
        return [
            Check(
                "expo",
                "fail",
                f"{settings.expo.base_url} rejected the access token (401)",
                "set TZPUSH_EXPO__ACCESS_TOKEN to a valid token of this project",
            )
        ]
    if resp.status_code >= 400:
        return [Check("expo", "fail", f"HTTP {resp.status_code}: {resp.text[:160]}", "")]
    auth = "token accepted" if settings.expo.access_token else "no access token configured"
    return [Check("expo", "ok", f"{settings.expo.base_url} answered 200 ({auth})")]


def run_checks(
    settings: Settings, *, fix_indexes: bool = False, clock: Clock = utcnow
) -> list[Check]:
    steps: list[Callable[[], list[Check]]] = [
        lambda: check_settings(settings),
        lambda: check_database(settings, fix_indexes, clock),
        lambda: check_broker(settings),
        lambda: check_expo(settings),
    ]
    out: list[Check] = []
    for step in steps:
        out += step()
    return out


def render(checks: list[Check]) -> None:
    from rich.table import Table
    from rich.text import Text

    from shared import terminal

    colour = {"ok": "green", "warn": "yellow", "fail": "red"}
    t = Table(title="tzpush doctor")
    for col in ("check", "result", "detail", "fix"):
        t.add_column(col, overflow="fold")
    for c in checks:
        t.add_row(Text(c.name), f"[{colour[c.status]}]{c.status}[/]", Text(c.detail), Text(c.fix))
    terminal.console().print(t)
