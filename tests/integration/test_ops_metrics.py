"""The /metrics endpoint exposes the send counters after a run (and /healthz answers)."""

from __future__ import annotations

import datetime as dt
import re

import requests

from shared import metrics
from shared.clock import utcnow
from tests.integration.harness import wait_for
from tests.integration.ops_helpers import free_port

SUCCESS = re.compile(
    r'^tzpush_messages_total\{category="activity",outcome="success"\} (\S+)$', re.M
)


def _success(body: str) -> float:
    m = SUCCESS.search(body)
    return float(m.group(1)) if m else 0.0


def test_metrics_endpoint_exposes_counters_after_a_run(world):
    port = free_port()
    server = metrics.serve("127.0.0.1", port, lambda: {"database": None, "broker": None})
    assert server is not None
    url = f"http://127.0.0.1:{port}"
    try:
        before = _success(requests.get(f"{url}/metrics", timeout=5).text)
        m = world.manager()
        for u in ("m1", "m2", "m3"):
            world.user(u, "Asia/Kathmandu", manager=m)
        due = (utcnow() + dt.timedelta(seconds=3)).replace(microsecond=0)
        docs = world.due_messages(["m1", "m2", "m3"], due, category="activity", label="walk")
        rc = world.start_consumer()
        wait_for(lambda: world.all_terminal([d["_id"] for d in docs]), 30, what="sent")
        body = wait_for(
            lambda: (
                (b := requests.get(f"{url}/metrics", timeout=5).text)
                and _success(b) >= before + 3
                and b
            ),
            10,
            what="counter",
        )
        rc.stop()
        assert 'tzpush_claims_total{category="activity",result="taken"}' in body
        assert 'tzpush_send_lateness_seconds_count{category="activity"}' in body
        assert 'tzpush_wakeups_total{category="activity",result="received"}' in body
        assert "tzpush_wakeups_armed_total" in body
        health = requests.get(f"{url}/healthz", timeout=5)
        assert health.status_code == 200 and health.json() == {"ok": True, "problems": {}}
    finally:
        server.shutdown()
