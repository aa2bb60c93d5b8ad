"""Readiness as the deploy definitions assume it: /healthz follows the broker and the database,
and SIGTERM ends a service with exit code 0 (ECS stopTimeout, compose health checks)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import requests

from tests.integration.consumer_support import consumer_env
from tests.integration.harness import World, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def health(port: int) -> tuple[int, dict] | None:
    try:
        r = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    except requests.ConnectionError:
        return None
    return r.status_code, r.json()


def start(world: World, role: str, **env: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    e = consumer_env(world.settings, TZPUSH_METRICS__PORT=str(port), **env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ops.cli", role],
        env=e,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, port


def test_consumer_health_follows_the_broker_and_sigterm_exits_zero(world: World) -> None:
    dead = free_port()  # nothing listens here: the broker is "down"
    proc, port = start(world, "consumer", TZPUSH_STOMP__PORT=str(dead))
    try:
        code, body = wait_for(lambda: health(port), 30, what="/healthz answering")
        assert code == 503 and body["problems"]["broker"] == "not connected"
        assert "database" not in body["problems"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0

    proc, port = start(world, "consumer")
    try:
        wait_for(lambda: (health(port) or (0, {}))[0] == 200, 30, what="/healthz 200")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert time.monotonic() - t0 < world.settings.shutdown.timeout_s + 5
    finally:
        if proc.poll() is None:
            proc.kill()


def test_creator_health_and_sigterm(world: World) -> None:
    proc, port = start(world, "creator")
    try:
        wait_for(lambda: (health(port) or (0, {}))[0] == 200, 60, what="/healthz 200")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_healthz_says_which_categories_no_live_consumer_takes(world: World) -> None:
    """Issue 15: the registry of live senders tells /healthz (an alert, still 200: restarting
    the creator would not start a consumer)."""
    creator, port = start(world, "creator")
    consumer = None
    try:
        code, body = wait_for(lambda: health(port), 60, what="/healthz answering")
        assert code == 200
        said = body["alerts"]["consumers"]
        assert said.startswith("no consumer alive for category ") and "meal" in said
        consumer, _ = start(world, "consumer")

        def meal_covered() -> bool:  # a consumer of every category: no alert left
            return "consumers" not in (health(port) or (0, {}))[1].get("alerts", {})

        wait_for(meal_covered, 30, what="the consumer to register")
    finally:
        for proc in (creator, consumer):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
