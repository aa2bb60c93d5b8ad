"""Prometheus metrics of every tzpush service, and the /metrics + /healthz endpoint.

Names are defined once here; services increment them. ``serve(settings, health)`` starts a small
HTTP server: ``/metrics`` (Prometheus text format) and ``/healthz`` (200 when ``health()`` says
every dependency is reachable, 503 with the reasons otherwise).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

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
PLANNED = Counter("tzpush_planned_messages_total", "Messages inserted by the planner")
ARMED = Counter("tzpush_wakeups_armed_total", "Wake-ups scheduled on the broker")
MISSED_BY_JANITOR = Counter("tzpush_janitor_ended_total", "Overdue messages ended by the janitor")
HELD = Gauge("tzpush_consumer_held_messages", "Messages a consumer holds for their due instant")
DLQ = Counter("tzpush_dead_lettered_total", "Wake-ups sent to the dead-letter queue", ["reason"])


def expo_event(name: str, fields: dict[str, object]) -> None:
    """ExpoSender.on_event hook: turn its events into metrics."""
    kind = str(fields.get("kind", "send"))
    if name == "retry":
        RETRIES.labels(kind).inc()
    elif name == "http_429":
        HTTP_429.labels(kind).inc()
    elif name == "request":
        EXPO_REQUESTS.labels(kind, str(fields.get("status", ""))).inc()


Health = Callable[[], dict[str, str | None]]


def serve(host: str, port: int, health: Health) -> ThreadingHTTPServer | None:
    """Serve /metrics and /healthz in a daemon thread; port 0 = disabled. Returns the server."""
    if not port:
        return None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                body, ctype, code = generate_latest(), CONTENT_TYPE_LATEST, 200
            elif self.path.startswith("/healthz"):
                problems = {k: v for k, v in health().items() if v}
                code = 503 if problems else 200
                body = json.dumps({"ok": not problems, "problems": problems}).encode()
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

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics on http://%s:%d/metrics", host, server.server_address[1])
    return server
