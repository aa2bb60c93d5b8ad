"""The local stack itself, on the real services: scheduler, durability, index, CLI lifecycle."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import stomp
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from devstack.config import StackConfig
from devstack.probes import stomp_ready
from devstack.stack import LocalStack

from .conftest import REPO_ROOT, SECANTUS_VENV, Stack


class Collector(stomp.ConnectionListener):
    """Puts every MESSAGE (with its arrival time) and RECEIPT on queues: wait with timeouts."""

    def __init__(self) -> None:
        self.messages: queue.Queue[tuple[float, Any]] = queue.Queue()
        self.receipts: queue.Queue[str] = queue.Queue()

    def on_message(self, frame: Any) -> None:
        self.messages.put((time.monotonic(), frame))

    def on_receipt(self, frame: Any) -> None:
        self.receipts.put(frame.headers["receipt-id"])


def connect(stack: Stack) -> tuple[stomp.Connection12, Collector]:
    s = stack.settings.stomp
    conn = stomp.Connection12([(s.host, s.port)], reconnect_attempts_max=1)
    collector = Collector()
    conn.set_listener("collector", collector)
    passcode = s.passcode.get_secret_value() if s.passcode else None
    conn.connect(s.login, passcode, wait=True)
    return conn, collector


def send_scheduled(conn: stomp.Connection12, collector: Collector, dest: str, body: str, ms: int):
    """A persistent scheduled SEND, confirmed by a receipt; returns the monotonic send time."""
    receipt = uuid.uuid4().hex
    sent_at = time.monotonic()
    conn.send(
        dest,
        body,
        headers={"persistent": "true", "AMQ_SCHEDULED_DELAY": str(ms), "receipt": receipt},
    )
    assert collector.receipts.get(timeout=10) == receipt
    return sent_at


@pytest.fixture
def destination() -> str:
    return f"/queue/test.stack.{uuid.uuid4().hex[:12]}"


def test_scheduled_delay_is_honoured(stack: Stack, destination: str) -> None:
    conn, collector = connect(stack)
    try:
        conn.subscribe(destination, id="1", ack="auto")
        sent_at = send_scheduled(conn, collector, destination, "hello", 3000)
        arrived_at, frame = collector.messages.get(timeout=10)
    finally:
        conn.disconnect()
    waited = arrived_at - sent_at
    assert frame.body == "hello"
    # Without schedulerSupport="true" the broker ignores the header and delivers at once.
    assert waited >= 3.0, f"delivered after {waited:.2f} s: AMQ_SCHEDULED_DELAY was ignored"
    assert waited < 10.0


def test_scheduled_message_survives_broker_kill9(stack: Stack, destination: str) -> None:
    conn, collector = connect(stack)
    sent_at = send_scheduled(conn, collector, destination, "survivor", 6000)
    conn.disconnect()

    stack.kill9("activemq")
    stack.start("activemq")

    conn, collector = connect(stack)
    try:
        conn.subscribe(destination, id="1", ack="auto")
        arrived_at, frame = collector.messages.get(timeout=30)
    finally:
        conn.disconnect()
    assert frame.body == "survivor"
    assert arrived_at - sent_at >= 6.0


def test_database_survives_kill9(stack: Stack, db: Database) -> None:
    db["drill"].insert_one({"_id": "kept", "at": datetime(2026, 1, 1, tzinfo=UTC)})
    stack.kill9("mongo")
    stack.start("mongo")
    assert db["drill"].find_one({"_id": "kept"}) is not None  # the client reconnects by itself


NOTIFICATION_KEY = [
    ("scheduledAt", 1),
    ("userId", 1),
    ("notificationTokenId", 1),
    ("category", 1),
    ("label", 1),
]


def test_partial_unique_index_refuses_second_pending_duplicate(db: Database) -> None:
    messages = db["notification_messages"]
    messages.create_index(
        NOTIFICATION_KEY,
        unique=True,
        partialFilterExpression={"status": "pending", "isDeleted": False},
    )
    occurrence = {
        "scheduledAt": datetime(2026, 3, 29, 6, 30, tzinfo=UTC),
        "userId": "u1",
        "notificationTokenId": "t1",
        "category": "meal",
        "label": "breakfast",
        "isDeleted": False,
    }
    first = messages.insert_one({**occurrence, "status": "pending"}).inserted_id
    with pytest.raises(DuplicateKeyError):
        messages.insert_one({**occurrence, "status": "pending"})

    messages.update_one({"_id": first}, {"$set": {"status": "success"}})
    messages.insert_one({**occurrence, "status": "pending"})
    assert messages.count_documents({"userId": "u1"}) == 2
    stored = messages.find_one({"_id": first})
    assert stored is not None and stored["scheduledAt"].tzinfo is not None  # tz_aware client


# -- `tzpush services` lifecycle, on its own state dir and free ports -----------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.fixture
def cli_state(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A state dir sharing the installed SecantusDB venv, free ports, and the env to use them."""
    (tmp_path / "secantus-venv").symlink_to(SECANTUS_VENV)
    stomp_port, mongo_port = free_port(), free_port()
    env = {
        **os.environ,
        "TZPUSH_LOCAL__STATE_DIR": str(tmp_path),
        "TZPUSH_STOMP__PORT": str(stomp_port),
        "TZPUSH_MONGO__URI": f"mongodb://127.0.0.1:{mongo_port}/?directConnection=true",
    }
    yield tmp_path, env
    LocalStack(StackConfig(state_dir=tmp_path)).down()  # whatever the test left running


def tzpush(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ops.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_services_up_twice_status_down(stack: Stack, cli_state: tuple[Path, dict[str, str]]):
    state, env = cli_state
    # Neither a pid file naming someone else's process nor the session stack may be touched.
    foreign = subprocess.Popen(["sleep", "300"])
    try:
        first = tzpush(env, "services", "up")
        assert first.returncode == 0, first.stderr
        assert first.stdout.count("started") == 2
        pids = {n: int((state / f"{n}.pid").read_text()) for n in ("activemq", "mongo")}

        second = tzpush(env, "services", "up")
        assert second.returncode == 0, second.stderr
        assert second.stdout.count("already running") == 2
        assert {n: int((state / f"{n}.pid").read_text()) for n in pids} == pids

        status = tzpush(env, "services", "status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.count("running") == 2
        assert all(str(pid) in status.stdout for pid in pids.values())

        down = tzpush(env, "services", "down")
        assert down.returncode == 0, down.stderr
        assert not any(alive(pid) for pid in pids.values())
        assert not list(state.glob("*.pid"))

        (state / "activemq.pid").write_text(f"{foreign.pid}\n")  # a recycled pid, say
        again = tzpush(env, "services", "down")
        assert again.returncode == 0, again.stderr
        assert again.stdout.count("not running") == 2
        assert foreign.poll() is None
        assert stack.local.pid("activemq") and stack.local.pid("mongo")
    finally:
        foreign.kill()
        foreign.wait()


def test_services_up_names_a_port_taken_by_another_process(cli_state):
    state, env = cli_state
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        env = {**env, "TZPUSH_STOMP__PORT": str(port)}
        result = tzpush(env, "services", "up", "activemq")
    assert result.returncode == 1
    assert f"port {port}" in result.stderr
    assert "already in use" in result.stderr
    assert not (state / "activemq.pid").exists()


def test_broker_credentials_when_configured(tmp_path: Path) -> None:
    config = StackConfig(
        state_dir=tmp_path,
        stomp_port=free_port(),
        mongo_port=free_port(),
        stomp_login="amq-user",
        stomp_passcode="pa:ss=word",
        venv_dir=SECANTUS_VENV,
    )
    local = LocalStack(config, die_with_parent=True)
    try:
        assert local.start("activemq")  # its ready check logs in with the credentials
        creds = tmp_path / "activemq" / "data" / "credentials.properties"
        assert creds.stat().st_mode & 0o777 == 0o600
        cmdline = Path(f"/proc/{local.pid('activemq')}/cmdline").read_bytes()
        assert b"pa:ss=word" not in cmdline  # never on the command line
        assert not stomp_ready("127.0.0.1", config.stomp_port)  # anonymous refused
        assert not stomp_ready("127.0.0.1", config.stomp_port, "amq-user", "wrong")
    finally:
        local.down()
