"""Prometheus metrics of every tzpush service, and the /metrics + /healthz endpoint.

Names are defined once here; services increment them. ``serve(settings, health)`` starts a small
HTTP server: ``/metrics`` (Prometheus text format) and ``/healthz`` (200 when ``health()`` says
every dependency is reachable, 503 with the reasons otherwise).

Project-level Expo errors (the project's credentials: ``InvalidCredentials``,
``MismatchSenderId``, ``UNAUTHORIZED``) raise the alert: ``tzpush_expo_project_errors_total``,
``tzpush_expo_project_error_last_seen_seconds``, and an ``alerts`` entry in /healthz for
``ALERT_WINDOW_S`` after the last one. /healthz stays 200 for it: a container health check that
failed on it would restart every consumer, which cannot fix credentials.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric

from shared.domain.validation import BadDocument
from shared.errors import PermanentError

log = logging.getLogger(__name__)

MESSAGES = Counter(
    "tzpush_messages_total", "Messages that reached a terminal status", ["category", "outcome"]
)
LATENESS = Histogram(
    "tzpush_send_lateness_seconds",
    "Time from a message's due instant to the Expo request that carried it",
    ["category"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600),
)
CLAIMS = Counter(
    "tzpush_claims_total", "Messages taken through the send guard", ["category", "result"]
)
WAKEUPS = Counter("tzpush_wakeups_total", "Wake-ups received", ["category", "result"])
RETRIES = Counter("tzpush_expo_retries_total", "Expo requests retried", ["kind"])
HTTP_429 = Counter("tzpush_expo_429_total", "HTTP 429 answers from Expo", ["kind"])
EXPO_REQUESTS = Counter("tzpush_expo_requests_total", "Expo requests", ["kind", "status"])
TOKENS_DEACTIVATED = Counter("tzpush_tokens_deactivated_total", "Tokens deactivated", ["reason"])
RECEIPTS = Counter("tzpush_receipts_total", "Receipts recorded", ["outcome"])
PLAN_SECONDS = Histogram(
    "tzpush_planning_pass_seconds",
    "Duration of a planning pass",
    buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
)
PLAN_FAILURES = Counter(
    "tzpush_planning_pass_failures_total", "Planning passes that ended in an error (retried)"
)
PLAN_LAST_SUCCESS = Gauge(
    "tzpush_planning_pass_last_success_seconds",
    "Unix time of this creator's last completed planning pass (its start time before the first)",
)
PLAN_INTERVAL = Gauge(
    "tzpush_planning_interval_seconds", "The creator's planning period (creator.interval_seconds)"
)
PLANNED = Counter("tzpush_planned_messages_total", "Messages inserted by the planner")
ARMED = Counter("tzpush_wakeups_armed_total", "Wake-ups scheduled on the broker")
MISSED_BY_JANITOR = Counter("tzpush_janitor_ended_total", "Overdue messages ended by the janitor")
BROKER_FAILOVERS = Counter(
    "tzpush_broker_failovers_total", "Reconnects that landed on another broker than before"
)
BROKER_ENDPOINT = Gauge(
    "tzpush_broker_endpoint", "Position in TZPUSH_STOMP__ENDPOINTS of the broker connected to"
)
HELD = Gauge("tzpush_consumer_held_messages", "Messages a consumer holds for their due instant")
DLQ = Counter("tzpush_dead_lettered_total", "Wake-ups sent to the dead-letter queue", ["reason"])
BAD_DOCUMENTS = Counter(
    "tzpush_bad_documents_total",
    "Stored documents a stage skipped because a field cannot be used (see tzpush doctor)",
    [
        "stage",
        "kind",
    ],  # stage: planner|janitor|receipts|consumer; kind: reminder|user|token|message
)


def bad_document(logger: logging.Logger, stage: str, bad: BadDocument) -> None:
    """Report a stored document ``stage`` skipped: one log line with its id and what is wrong,
    and ``tzpush_bad_documents_total``. ``tzpush doctor`` lists such documents."""
    BAD_DOCUMENTS.labels(stage, bad.kind).inc()
    logger.warning(
        "%s: skipped bad %s %s: %s (tzpush doctor lists bad documents)",
        stage,
        bad.kind,
        bad.id,
        bad.problem,
    )


EXPO_PROJECT_ERRORS = Counter(
    "tzpush_expo_project_errors_total",
    "Pushes failed for the project's credentials (InvalidCredentials, MismatchSenderId, "
    "UNAUTHORIZED): alert on any increase; tokens are never touched for these",
    ["code"],
)
EXPO_PROJECT_ERROR_LAST = Gauge(
    "tzpush_expo_project_error_last_seen_seconds",
    "Unix time of the last project-level Expo error of each code (the alert)",
    ["code"],
)
ALERT_WINDOW_S = 900.0  # /healthz names a project-level error this long after the last one


class ExpoAlerts:
    """The project-level Expo errors this process saw in the last ``window_s`` (per code: how
    many pushes, first and last seen), as /healthz shows them."""

    def __init__(
        self, window_s: float = ALERT_WINDOW_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, float, float]] = {}  # code -> (count, first, last)

    def record(self, code: str, count: int) -> None:
        now = self._clock()
        with self._lock:
            n, first, last = self._seen.get(code, (0, now, now))
            if now - last > self.window_s:  # an earlier episode: start counting again
                n, first = 0, now
            self._seen[code] = (n + count, first, now)

    def active(self) -> dict[str, str]:
        """``{"expo": "..."}`` while a project-level error is recent, else ``{}``."""
        now = self._clock()
        with self._lock:
            recent = {c: v for c, v in self._seen.items() if now - v[2] <= self.window_s}
        if not recent:
            return {}
        parts = [
            f"{code}: {n} push(es) failed since {_utc(first)}, last {_utc(last)}"
            for code, (n, first, last) in sorted(recent.items())
        ]
        return {
            "expo": "; ".join(parts) + ". The project's push credentials (FCM/APNs keys, or "
            "the Expo access token) are wrong, not the devices: tokens untouched. Fix them, "
            "then `tzpush replay --status failed --cause credentials`"
        }

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


def _utc(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


EXPO_ALERTS = ExpoAlerts()


def expo_event(name: str, fields: dict[str, object]) -> None:
    """ExpoSender.on_event hook: turn its events into metrics (and the project alert)."""
    kind = str(fields.get("kind", "send"))
    if name == "retry":
        RETRIES.labels(kind).inc()
    elif name == "http_429":
        HTTP_429.labels(kind).inc()
    elif name == "request":
        EXPO_REQUESTS.labels(kind, str(fields.get("status", ""))).inc()
    elif name == "project_error":
        code, count = str(fields.get("code", "")), int(str(fields.get("count", 1)))
        EXPO_PROJECT_ERRORS.labels(code).inc(count)
        EXPO_PROJECT_ERROR_LAST.labels(code).set(time.time())
        EXPO_ALERTS.record(code, count)


Health = Callable[[], dict[str, str | None]]


Alerts = Callable[[], dict[str, str]]


class ScrapeProbes:
    """Gauges read when /metrics is scraped, from what /healthz reads too (so the alert rules
    and /healthz never disagree): ``tzpush_dependency_up{dependency}`` (1 when ``health`` finds
    the database or broker reachable, else 0), ``tzpush_category_live_consumers{category}``
    (live consumers per configured category, from the sender registry) and
    ``tzpush_category_grace_seconds{category}`` (each category's grace window). A probe that
    raises is left out of that scrape, never fails it."""

    def __init__(self) -> None:
        self.health: Health | None = None
        self.consumers: Callable[[], Mapping[str, int]] | None = None
        self.grace: Mapping[str, float] = {}

    def collect(self) -> Iterator[Metric]:
        if self.health is not None:
            up = GaugeMetricFamily(
                "tzpush_dependency_up",
                "1 when this process reaches the dependency (database, broker), else 0",
                labels=["dependency"],
            )
            try:
                for name, problem in sorted(self.health().items()):
                    up.add_metric([name], 0.0 if problem else 1.0)
            except Exception as exc:
                log.warning("metrics: health probe failed: %s", exc)
            else:
                yield up
        if self.consumers is not None:
            live = GaugeMetricFamily(
                "tzpush_category_live_consumers",
                "Live consumers taking each configured category (0: nobody sends it)",
                labels=["category"],
            )
            try:
                for category, n in sorted(self.consumers().items()):
                    live.add_metric([category], float(n))
            except Exception as exc:
                log.warning("metrics: live consumers unreadable: %s", exc)
            else:
                yield live
        if self.grace:
            grace = GaugeMetricFamily(
                "tzpush_category_grace_seconds",
                "How late a push of each category may still go out (past it: is_missed)",
                labels=["category"],
            )
            for category, seconds in sorted(self.grace.items()):
                grace.add_metric([category], float(seconds))
            yield grace


PROBES = ScrapeProbes()
REGISTRY.register(PROBES)


ROLE_PORTS = {"creator": 9464, "consumer": 9465, "receipts": 9466}
"""Each role's own /metrics port when TZPUSH_METRICS__PORT is not set, so that every role runs
beside the others on one host with the defaults."""


def metrics_port(group: Any, role: str) -> int:
    """The port ``role`` serves /metrics and /healthz on: the setting when given (0: none), else
    the role's own (``ROLE_PORTS``)."""
    return ROLE_PORTS[role] if group.port is None else int(group.port)


def serve(
    host: str,
    port: int,
    health: Health,
    alerts: Alerts | None = None,
    *,
    consumers: Callable[[], Mapping[str, int]] | None = None,
    grace: Mapping[str, float] | None = None,
) -> ThreadingHTTPServer | None:
    """Serve /metrics and /healthz in a daemon thread; port 0 = disabled. Returns the server.

    ``health`` names this process's own problems (any: 503, restart me); ``alerts`` names what
    an operator must fix elsewhere (200 all the same: restarting this process fixes nothing),
    beside Expo's project-level alerts. /metrics also reads ``health``, ``consumers`` (live
    consumers per category) and ``grace`` (seconds per category) at each scrape
    (``ScrapeProbes``)."""
    if not port:
        return None
    PROBES.health, PROBES.consumers = health, consumers
    PROBES.grace = dict(grace or {})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                body, ctype, code = generate_latest(), CONTENT_TYPE_LATEST, 200
            elif self.path.startswith("/healthz"):
                problems = {k: v for k, v in health().items() if v}
                code = 503 if problems else 200
                said: dict[str, object] = {"ok": not problems, "problems": problems}
                said_alerts: dict[str, object] = dict(EXPO_ALERTS.active())  # never a 503
                if alerts is not None:
                    try:
                        said_alerts.update(alerts())
                    except Exception as exc:  # an alert that cannot be read is not a 503 either
                        said_alerts["alerts"] = f"could not be read: {type(exc).__name__}"
                if said_alerts:
                    said["alerts"] = said_alerts
                body = json.dumps(said).encode()
                ctype = "application/json"
            else:
                body, ctype, code = b"not found\n", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise PermanentError(
            f"cannot serve /metrics and /healthz on {host}:{port} ({exc.strerror}): another "
            "process (another tzpush role?) holds it; set TZPUSH_METRICS__PORT to a free port, "
            "or 0 for none"
        ) from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics on http://%s:%d/metrics", host, server.server_address[1])
    return server
