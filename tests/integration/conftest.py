"""Integration fixtures: the real local stack, started once per session on test ports.

- ``stack`` (session): ActiveMQ + SecantusDB on their own ports and state dir, wiped at session
  start; ``stack.settings`` points at them (database ``tzpush_test``). ``stack.kill9(name)``,
  ``stack.start(name)``, ``stack.restart(name)``, ``stack.stop(name)`` for crash drills, where
  ``name`` is ``"activemq"`` or ``"mongo"``. Stopped at session end, also on failure or Ctrl-C;
  an atexit hook and PR_SET_PDEATHSIG are backstops.
- ``mongo_client`` (session): a pymongo client (tz_aware, directConnection).
- ``db`` (function): the test database; every collection is dropped after each test.

Environment overrides: TZPUSH_TEST_STATE_DIR (default .local/test), TZPUSH_TEST_STOMP_PORT
(61623), TZPUSH_TEST_MONGO_PORT (27027): away from the defaults so a `make run` stack keeps running.
Two sessions on the same state dir take turns (`session_lock`).

Under pytest-xdist (`make test` runs ``-n``: the suite mostly waits for due instants, a third of
one core busy on average), each worker has a stack of its own: worker ``gwN`` uses the state dir
``<state dir>/gwN`` and the ports plus ``100 + 10 * N`` (clear of a one-process session's and of
the bench's). Workers hold the state dir's lock shared, a one-process session exclusive, so the
two kinds of session take turns too.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymongo
import pytest
from pymongo.database import Database

from devstack.config import StackConfig
from devstack.fake_expo import FakeExpo
from devstack.install import ensure_installed
from devstack.stack import LocalStack
from shared.expo.sender import ExpoSender
from shared.settings import ExpoSettings, Settings
from tests.integration.expo_support import SENDER_TUNING, MakeFake

REPO_ROOT = Path(__file__).resolve().parents[2]
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... under pytest -n
_WORKER_N = int(_WORKER[2:]) if _WORKER.startswith("gw") and _WORKER[2:].isdigit() else 0
_BASE_STATE_DIR = Path(os.environ.get("TZPUSH_TEST_STATE_DIR", REPO_ROOT / ".local" / "test"))
TEST_STATE_DIR = _BASE_STATE_DIR / _WORKER if _WORKER else _BASE_STATE_DIR
_PORT_OFFSET = 100 + 10 * _WORKER_N if _WORKER else 0
TEST_STOMP_PORT = int(os.environ.get("TZPUSH_TEST_STOMP_PORT", "61623")) + _PORT_OFFSET
TEST_MONGO_PORT = int(os.environ.get("TZPUSH_TEST_MONGO_PORT", "27027")) + _PORT_OFFSET
TEST_DATABASE = "tzpush_test"
# SecantusDB's venv is shared with `make install` (.local/secantus-venv), never wiped per session.
SECANTUS_VENV = REPO_ROOT / ".local" / "secantus-venv"
SESSION_LOCK_WAIT_S = 240.0


def make_test_settings(**overrides: Any) -> Settings:
    """Settings pointed at the test stack; keyword groups (e.g. ``expo={...}``) override."""
    values: dict[str, Any] = {
        "mongo": {
            "uri": f"mongodb://127.0.0.1:{TEST_MONGO_PORT}/?directConnection=true",
            "database": TEST_DATABASE,
        },
        "stomp": {"host": "127.0.0.1", "port": TEST_STOMP_PORT},
        "local": {"state_dir": str(TEST_STATE_DIR)},
    }
    values.update(overrides)
    return Settings.load(**values)


@dataclass
class Stack:
    """The running test stack. ``local`` is the underlying `devstack.stack.LocalStack`."""

    settings: Settings
    local: LocalStack

    def kill9(self, service: str) -> int:
        """SIGKILL `service` (crash drill); returns the pid that was killed."""
        return self.local.kill9(service)

    def start(self, service: str) -> bool:
        """Start `service` on the same data dir and wait until ready (False if it was up)."""
        return self.local.start(service)

    def stop(self, service: str) -> int | None:
        """Graceful SIGTERM stop."""
        return self.local.stop(service)

    def restart(self, service: str) -> None:
        """Graceful stop, then start on the same data dir."""
        self.local.restart(service)

    def mongo_client(self, **kwargs: Any) -> pymongo.MongoClient[dict[str, Any]]:
        options: dict[str, Any] = {"tz_aware": True, "serverSelectionTimeoutMS": 10000}
        options.update(kwargs)
        return pymongo.MongoClient(self.settings.mongo.uri.get_secret_value(), **options)


@pytest.fixture(scope="session")
def session_lock() -> Iterator[None]:
    """One test session per state dir: a second `make test` in the same tree waits its turn
    (the stack's ports and pid files are shared). The Makefile's safety net takes it too."""
    TEST_STATE_DIR.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        if _WORKER:  # the whole run's lock, shared with the other workers
            base = held.enter_context(open(_BASE_STATE_DIR / ".session.lock", "a"))
            _take(base, fcntl.LOCK_SH, _BASE_STATE_DIR)
        lock = held.enter_context(open(TEST_STATE_DIR / ".session.lock", "a"))
        _take(lock, fcntl.LOCK_EX, TEST_STATE_DIR)
        yield


def _take(lock: Any, mode: int, state_dir: Path) -> None:
    deadline = time.monotonic() + SESSION_LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"another test session holds {state_dir}/.session.lock; set "
                    "TZPUSH_TEST_STATE_DIR, TZPUSH_TEST_STOMP_PORT, TZPUSH_TEST_MONGO_PORT "
                    "to run two sessions side by side"
                )
            time.sleep(1.0)


@pytest.fixture(scope="session")
def stack(session_lock: None) -> Iterator[Stack]:
    settings = make_test_settings()
    # Test commands on: a drill can make the API's next inserts fail (configureFailPoint).
    config = StackConfig.from_settings(settings, venv_dir=SECANTUS_VENV, mongo_test_commands=True)
    local = LocalStack(config, die_with_parent=True)
    local.down()  # leftovers of a session that was killed hard (only what our pid files name)
    for name in ("activemq", "mongo"):
        shutil.rmtree(TEST_STATE_DIR / name, ignore_errors=True)
    ensure_installed(config)
    atexit.register(local.down)
    try:
        local.up()
        yield Stack(settings=settings, local=local)
    finally:
        local.down()
        atexit.unregister(local.down)


@pytest.fixture(scope="session")
def mongo_client(stack: Stack) -> Iterator[pymongo.MongoClient[dict[str, Any]]]:
    client = stack.mongo_client()
    yield client
    client.close()


@pytest.fixture
def db(stack: Stack, mongo_client: pymongo.MongoClient[dict[str, Any]]) -> Iterator[Database]:
    database: Database = mongo_client[stack.settings.mongo.database]
    yield database
    for name in database.list_collection_names():
        # Emptying first is 10 to 30 times faster than dropping a full collection on SecantusDB.
        database[name].delete_many({})
        database.drop_collection(name)


@pytest.fixture
def world(stack: Stack, db: Database) -> Iterator[Any]:
    """An isolated world on the real stack: own queue prefix, own Expo fake (see harness.py)."""
    from tests.integration.harness import make_world

    with make_world(stack.settings, db) as w:
        yield w


@pytest.fixture
def make_fake() -> Iterator[MakeFake]:
    """Fakes with receipts at once and no rate limit unless told otherwise."""
    started: list[FakeExpo] = []

    def make(**kwargs: Any) -> FakeExpo:
        kwargs.setdefault("receipt_delay_s", 0.0)
        kwargs.setdefault("rate_per_second", 0)
        fake = FakeExpo(port=0, **kwargs).start()
        started.append(fake)
        return fake

    yield make
    for fake in started:
        fake.stop()


@pytest.fixture
def make_sender() -> Iterator[Callable[..., ExpoSender]]:
    """Senders to a URL: ExpoSettings fields and the sender's tuning as keyword arguments."""
    senders: list[ExpoSender] = []

    def make(url: str, *, on_event: Any = None, **kwargs: Any) -> ExpoSender:
        fields = {"base_url": url, "timeout_s": 5.0, "rate_per_second": 100_000.0}
        tuning = {k: kwargs.pop(k) for k in SENDER_TUNING if k in kwargs}
        fields.update(kwargs)
        sender = ExpoSender(ExpoSettings(**fields), on_event=on_event, **tuning)
        senders.append(sender)
        return sender

    yield make
    for sender in senders:
        sender.close()


@pytest.fixture(scope="module")
def api(stack: Stack) -> Iterator[Any]:
    """A real ``tzpush api`` process for the module (``test_api_support.start_api``); a module
    that needs other settings defines its own ``api``."""
    from tests.integration.test_api_support import start_api

    with start_api(stack.settings) as server:
        yield server
