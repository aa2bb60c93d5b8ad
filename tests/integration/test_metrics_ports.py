"""Every role runs beside the others on one host with the default settings: each serves
``/metrics`` and ``/healthz`` on a port of its own (creator 9464, consumer 9465, receipts 9466,
``TZPUSH_METRICS__PORT`` overrides), and a port already taken is one line naming the setting,
not a traceback."""

from __future__ import annotations

import socket
import subprocess

from shared.metrics import ROLE_PORTS, metrics_port
from shared.settings import Settings
from tests.integration.conftest import REPO_ROOT
from tests.integration.consumer_support import TZPUSH, consumer_env


def test_each_role_has_its_own_default_metrics_port() -> None:
    defaults = Settings.load()
    ports = {role: metrics_port(defaults.metrics, role) for role in ("creator", "consumer")}
    ports["receipts"] = metrics_port(defaults.metrics, "receipts")
    assert ports == ROLE_PORTS == {"creator": 9464, "consumer": 9465, "receipts": 9466}
    chosen = Settings.load(metrics={"port": 9999})
    assert {metrics_port(chosen.metrics, r) for r in ROLE_PORTS} == {9999}
    off = Settings.load(metrics={"port": 0})
    assert {metrics_port(off.metrics, r) for r in ROLE_PORTS} == {0}


def test_a_taken_metrics_port_is_one_line_naming_the_setting(stack, db) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = consumer_env(stack.settings, TZPUSH_METRICS__PORT=str(port))
        run = subprocess.run(
            [str(TZPUSH), "receipts"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode != 0
    assert "Traceback" not in run.stderr, run.stderr
    assert f"127.0.0.1:{port}" in run.stderr and "TZPUSH_METRICS__PORT" in run.stderr, run.stderr
