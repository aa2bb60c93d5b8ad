"""Support for the HTTP API's integration tests (no tests here): a real ``tzpush api`` process.

``start_api(stack)`` runs ``tzpush api`` as a child process on a free loopback port, pointed at
the test stack's database and broker (its own queue prefix, so no other test's consumer sees
its wake-ups) and at an Expo fake of its own, with two fresh keys (``app`` and ``ops`` scope)
configured as hashes. Test modules wrap it in a module-scoped fixture: one process serves a
module, and the ``db`` fixture empties the database between tests (``prepare`` puts the
indexes back at each test's start).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pymongo.database import Database

from api.app import ensure_api_indexes
from api.keys import hash_key, new_key
from creator.planner import Planner
from devstack.fake_expo import FakeExpo
from shared.broker import StompClient
from shared.clock import utcnow
from shared.domain.messages import Status, terminal_update
from shared.settings import Settings
from shared.store import db as dbm
from tests.integration.consumer_support import TZPUSH, consumer_env

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0

Doc = dict[str, Any]


@dataclass
class ApiServer:
    url: str
    app_key: str
    ops_key: str
    settings: Settings  # what the process was given (queue prefix, Expo fake)
    fake: FakeExpo
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def client(self, key: str | None = "app", **kw: Any) -> httpx.Client:
        """An httpx client with the app (default) or ops key, or none (``key=None``)."""
        headers = dict(kw.pop("headers", {}))
        if key is not None:
            token = {"app": self.app_key, "ops": self.ops_key}.get(key, key)
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0, **kw)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env(
    settings: Settings, keys: list[dict[str, str]], port: int, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """A consumer's environment for these settings, with the API's own settings on top, and
    then ``extra`` (any variable a test wants the process to have)."""
    env = consumer_env(
        settings,
        TZPUSH_EXPO__RATE_PER_SECOND="100000",
        TZPUSH_EXPO__MAX_RETRIES="2",
        TZPUSH_OUTCOMES__RECEIPTS_DELAY_S="0",
        TZPUSH_API__HOST="127.0.0.1",
        TZPUSH_API__PORT=str(port),
        TZPUSH_API__KEYS=json.dumps(keys),
        TZPUSH_API__MAX_BODY_BYTES=str(settings.api.max_body_bytes),
        TZPUSH_API__CONSOLE_READ_ONLY=str(settings.api.console_read_only).lower(),
        TZPUSH_API__CONSOLE_SESSION_HOURS=str(settings.api.console_session_hours),
        TZPUSH_LOG_JSON="true",
        PYTHONUNBUFFERED="1",
    )
    return {**env, **(extra or {})}


@contextlib.contextmanager
def start_api(
    base: Settings,
    *,
    env: dict[str, str] | None = None,
    expo_token: str | None = None,
    **api: Any,
) -> Iterator[ApiServer]:
    """A running ``tzpush api`` on ``base``'s stack; ``api`` overrides the API settings
    (``console_read_only=True``), ``env`` adds environment variables to the process.
    ``expo_token``: the Expo fake refuses pushes without it (the API process is not given it,
    as on ECS: give it to a consumer)."""
    fake = FakeExpo(access_token=expo_token, rate_per_second=0, receipt_delay_s=0).start()
    settings = base.model_copy(
        update={
            "stomp": base.stomp.model_copy(update={"queue_prefix": f"api{uuid.uuid4().hex[:8]}"}),
            "expo": base.expo.model_copy(update={"base_url": fake.url}),
            "api": base.api.model_copy(update=api),
        }
    )
    app_key, ops_key = new_key(), new_key()
    keys = [
        {"name": "backend", "scope": "app", "sha256": hash_key(app_key)},
        {"name": "oncall", "scope": "ops", "sha256": hash_key(ops_key)},
    ]
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="tzpush-api-", suffix=".log")[1])
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", "api"],
            cwd=REPO,
            env=_env(settings, keys, port, env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = ApiServer(f"http://127.0.0.1:{port}", app_key, ops_key, settings, fake, log, proc)
    try:
        _wait_ready(server, proc)
        yield server
    finally:
        _stop(proc)
        fake.stop()
        text = log.read_text(errors="replace")
        assert app_key not in text and ops_key not in text, "an API key reached the log"
        log.unlink(missing_ok=True)


def consumer_burst(server: ApiServer, *categories: str, **env: str) -> str:
    """A ``tzpush consumer --burst`` on ``server``'s queues (``categories``: only those) and Expo
    fake (``env``: more of its environment, e.g. the Expo access token) drains what is queued
    (a replay), then exits; returns its output."""
    only = ["--categories", ",".join(categories)] if categories else []
    done = subprocess.run(
        [str(TZPUSH), "consumer", "--burst", "--idle-seconds", "3", *only],
        env=consumer_env(server.settings, **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _wait_ready(server: ApiServer, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"tzpush api exited {proc.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(server.url + "/readyz", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"tzpush api not ready in {START_TIMEOUT_S} s:\n{server.log_tail()}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def prepare(database: Database[Doc]) -> None:
    """The indexes the API relies on (the ``db`` fixture drops every collection after a test)."""
    dbm.ensure_indexes(database)
    ensure_api_indexes(database)


@contextlib.contextmanager
def planner(server: ApiServer, database: Database[Doc]) -> Iterator[Planner]:
    """A planner on the API's queues (for a planning pass the API's changes then extend)."""
    client = StompClient(server.settings).connect()
    try:
        yield Planner(database, client, server.settings)
    finally:
        client.close()


def insert_missed(database: Database[Doc], mid: str, uid: str, token: str) -> None:
    """A ``meal`` message ``mid`` of ``uid``'s reminder ``mr`` to ``token`` (the user's device
    registered with it), due two hours ago and ended ``is_missed``: what a replay takes."""
    registration = database[dbm.TOKENS].find_one({"userId": uid, "token": token})
    assert registration is not None, (uid, token)
    now = utcnow()
    due = now - dt.timedelta(hours=2)
    database[dbm.MESSAGES].insert_one(
        {
            "_id": mid,
            "userId": uid,
            "reminderId": "mr",
            "reminderVersion": 1,
            "notificationTokenId": registration["_id"],
            "token": token,
            "category": "meal",
            "label": "x",
            "title": "Hi",
            "body": None,
            "data": None,
            "scheduledAt": due,
            "localDate": due.date().isoformat(),
            "timezone": "UTC",
            "dailyCap": None,
            "quietHours": None,
            "isDeleted": False,
            "attempts": 0,
            "plannedAt": due,
            "createdAt": due,
            **terminal_update(Status.IS_MISSED, "7200 s late, grace 900 s", now),
        }
    )


def plan_window(server: ApiServer, database: Database[Doc]) -> None:
    """Run one planning pass, so the next 24 h are planned and every API change re-plans its
    user at once (as with a creator running)."""
    with planner(server, database) as p:
        p.run_pass()


def soon_hhmm(tz: str, minutes: int = 90) -> str:
    """The local time of day in ``tz``, ``minutes`` from now (a reminder due soon)."""
    from zoneinfo import ZoneInfo

    from shared.clock import utcnow

    return (utcnow() + dt.timedelta(minutes=minutes)).astimezone(ZoneInfo(tz)).strftime("%H:%M")


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
