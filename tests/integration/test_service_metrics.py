"""The metrics the alert rules (deploy/prometheus/alerts.yml) read, as the services export them:
each dependency's reachability, the live consumers of each category, each category's grace,
and the creator's last completed pass and period."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.consumer_support import consumer_env
from tests.integration.harness import World, wait_for
from tests.integration.test_service_health import free_port


def start(world: World, *args: str, **env: str) -> tuple[subprocess.Popen[bytes], int]:
    """``tzpush ARGS`` with its metrics on a free port of its own."""
    port = free_port()
    e = consumer_env(world.settings, TZPUSH_METRICS__PORT=str(port), **env)
    cmd = [sys.executable, "-m", "ops.cli", *args]
    return subprocess.Popen(cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    """Every sample of /metrics by (name, sorted labels), or None while it does not answer."""
    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except requests.ConnectionError:
        return None
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def stop(*procs: subprocess.Popen[bytes] | None) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def test_the_creator_exports_its_dependencies_its_passes_and_each_categorys_consumers(
    world: World,
) -> None:
    started = time.time()
    # The service's first pass follows one heartbeat (a third of the lease): 2 s here, not 20.
    creator, port = start(
        world,
        "creator",
        TZPUSH_CREATOR__INTERVAL_SECONDS="600",
        TZPUSH_CREATOR__LEASE_SECONDS="6",
    )
    consumer = None
    try:
        seen = wait_for(lambda: scrape(port), 60, what="/metrics answering")
        assert seen[("tzpush_dependency_up", (("dependency", "database"),))] == 1
        assert seen[("tzpush_dependency_up", (("dependency", "broker"),))] == 1
        assert seen[("tzpush_category_live_consumers", (("category", "meal"),))] == 0
        assert seen[("tzpush_planning_interval_seconds", ())] == 600
        assert seen[("tzpush_planning_pass_failures_total", ())] == 0
        first = seen[("tzpush_planning_pass_last_success_seconds", ())]
        assert started - 1 <= first <= time.time() + 1

        def passed() -> float | None:  # the first pass ends after the start's stamp
            last = (scrape(port) or {}).get(("tzpush_planning_pass_seconds_count", ()), 0)
            return last or None

        wait_for(passed, 60, what="a planning pass")
        done = scrape(port) or {}
        assert done[("tzpush_planning_pass_last_success_seconds", ())] >= first
        consumer, _ = start(world, "consumer", "--categories", "meal")

        def meal_consumers() -> float | None:
            n = (scrape(port) or {}).get(
                ("tzpush_category_live_consumers", (("category", "meal"),))
            )
            return n or None

        assert wait_for(meal_consumers, 30, what="the consumer to register") == 1
        assert (scrape(port) or {})[
            ("tzpush_category_live_consumers", (("category", "mood"),))
        ] == 0
    finally:
        stop(creator, consumer)


def test_a_consumer_exports_an_unreachable_broker_and_its_categories_grace(world: World) -> None:
    dead = free_port()  # nothing listens here: the broker is "down"
    proc, port = start(world, "consumer", TZPUSH_STOMP__PORT=str(dead))
    try:
        seen = wait_for(lambda: scrape(port), 30, what="/metrics answering")
        assert seen[("tzpush_dependency_up", (("dependency", "broker"),))] == 0
        assert seen[("tzpush_dependency_up", (("dependency", "database"),))] == 1
        grace = world.settings.grace_seconds("safety")
        assert seen[("tzpush_category_grace_seconds", (("category", "safety"),))] == grace
    finally:
        stop(proc)
