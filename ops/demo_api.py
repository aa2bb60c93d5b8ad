"""The demo's HTTP API: ``tzpush api`` started beside the demo with a fresh key, a curl example
and the operator console's URL printed, and the process stopped with the demo. Kept apart
from ``ops.demo`` (the stack, the seed and the live view) because it is a separate process
with its own life.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from devstack.processes import die_with_parent_preexec
from shared.settings import Settings

DEMO_KEY_NAME = "demo"

API_READY_S = 30.0


@dataclass
class DemoApi:
    """The demo's `tzpush api` child: its URL, its key, its process."""

    url: str
    key: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def console_url(self) -> str:
        return f"{self.url}/console/"

    def curl(self, user: str) -> str:
        return f"curl -s -H 'Authorization: Bearer {self.key}' {self.url}/v1/users/{user}/messages"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _tzpush(*args: str) -> list[str]:
    return [sys.executable, "-m", "ops.cli", *args]


def _new_key() -> tuple[str, dict[str, Any]]:
    """A fresh key and its TZPUSH_API__KEYS entry, from `tzpush api --new-key` itself. Of scope
    ops, so the one key serves the curl example and the operator console's login."""
    cmd = _tzpush("api", "--new-key", DEMO_KEY_NAME, "--scope", "ops")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
    lines = [ln.split("): ", 1)[1] for ln in out.splitlines() if "): " in ln]
    return lines[0], json.loads(lines[1])


def _free_port(host: str, port: int) -> int:
    """``port`` when it can be bound on ``host``, else a free one."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            sock.bind((host, 0))
        return int(sock.getsockname()[1])


def start_api(settings: Settings, api_port: int | None, console: Console) -> DemoApi:
    """`tzpush api` on the demo's database, queues and planning settings, with a fresh key.

    Its own session, so a Ctrl-C reaches only the demo, which stops it. Its log goes to the
    local state dir (``demo-api.log``)."""
    key, entry = _new_key()
    host = settings.api.host
    wanted = settings.api.port if api_port is None else api_port
    port = _free_port(host, wanted)
    if wanted and port != wanted:
        console.print(f"API port {wanted} unavailable; using {port}")
    env = {
        **os.environ,
        "TZPUSH_MONGO__URI": settings.mongo.uri.get_secret_value(),
        "TZPUSH_MONGO__DATABASE": settings.mongo.database,
        "TZPUSH_STOMP__HOST": settings.stomp.host,
        "TZPUSH_STOMP__PORT": str(settings.stomp.port),
        "TZPUSH_STOMP__QUEUE_PREFIX": settings.stomp.queue_prefix,
        # The demo's Expo fake: the console's replays and health checks go where the demo sends.
        "TZPUSH_EXPO__BASE_URL": settings.expo.base_url,
        "TZPUSH_CREATOR__INTERVAL_SECONDS": str(settings.creator.interval_seconds),
        "TZPUSH_CREATOR__HORIZON_HOURS": str(settings.creator.horizon_hours),
        "TZPUSH_API__KEYS": json.dumps([entry]),
        "TZPUSH_LOG_JSON": "true",
    }
    log_path = Path(settings.local.state_dir) / "demo-api.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            _tzpush("api", "--host", host, "--port", str(port)),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # Gone with the demo even if it is killed before it can stop it.
            preexec_fn=die_with_parent_preexec,
        )
    url_host = f"[{host}]" if ":" in host else host
    return DemoApi(f"http://{url_host}:{port}", key, proc, log_path)


def wait_api(api: DemoApi, timeout: float = API_READY_S) -> bool:
    """Until ``/healthz`` answers 200 (True), the process ends or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and api.proc.poll() is None:
        try:
            with urllib.request.urlopen(api.url + "/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def show_api(api: DemoApi | None, console: Console, user: str) -> None:
    if api is None:
        return
    if not wait_api(api):
        console.print(f"the API did not start (see {api.log_path}); the demo goes on without it")
        return
    for line in (
        f"API at {api.url} (interactive docs: {api.url}/docs); a user's messages, with the "
        f"demo's key (made for this run):",
        api.curl(user),
        f"Operator console: {api.console_url} (log in with the same key: {api.key})",
    ):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
