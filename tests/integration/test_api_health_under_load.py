"""The API's probes answer while its work pool is saturated: with the database paused (SIGSTOP)
under 60 concurrent reads, every worker thread of the pool waits on the database, yet
``/healthz`` answers at once (the process is alive) and ``/readyz`` answers 503 within its own
timeout (the database does not answer), as a load balancer's 5 s health check needs."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import httpx

from tests.integration.test_api_support import prepare

STUCK_REQUESTS = 60  # more than the work pool's threads (anyio's default: 40)
PROBE_BUDGET_S = 4.0


def test_the_probes_answer_while_every_worker_waits_on_a_paused_database(api, db, stack):
    prepare(db)
    with api.client("app") as app:
        assert app.put("/v1/users/u1", json={"timezone": "Asia/Tashkent"}).status_code == 200
    pid = stack.local.pid("mongo")
    assert pid is not None
    stuck: list[threading.Thread] = []

    def read() -> None:
        with api.client("app") as c, contextlib.suppress(httpx.HTTPError):
            c.get("/v1/users/u1")

    os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(STUCK_REQUESTS):
            t = threading.Thread(target=read, daemon=True)
            t.start()
            stuck.append(t)
        time.sleep(2.0)  # every request reaches the pool, and stays stuck there
        t0 = time.monotonic()
        health = httpx.get(api.url + "/healthz", timeout=30)
        health_s = time.monotonic() - t0
        t0 = time.monotonic()
        ready = httpx.get(api.url + "/readyz", timeout=30)
        ready_s = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    for t in stuck:
        t.join(60)
    assert health.status_code == 200 and health_s < PROBE_BUDGET_S, (health.status_code, health_s)
    assert ready.status_code == 503 and ready_s < PROBE_BUDGET_S, (ready.status_code, ready_s)
    assert "database" in ready.json()["problems"], ready.json()
    assert httpx.get(api.url + "/readyz", timeout=30).status_code == 200  # resumed: ready again
