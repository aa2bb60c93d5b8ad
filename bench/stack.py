"""The bench's own stack: ActiveMQ + SecantusDB on bench ports, the Expo fake and tzpush processes.

Everything runs on ports and a state dir of its own (stomp 61653, mongo 27057, fake 18795,
``.local/bench``, wiped at start) so the bench never touches a `make run` or test stack. The
fake, the consumer and the creator service run as subprocesses (each with its own GIL), are
started by pid and stopped by pid, also when a scenario fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymongo
from pymongo.database import Database

from devstack.config import StackConfig
from devstack.install import ensure_installed
from devstack.stack import LocalStack
from shared.broker import StompClient
from shared.settings import Settings
from shared.store import db as dbm

REPO = Path(__file__).resolve().parent.parent
# Overridable so a CI run of the bench can live next to a full one on the same machine.
STATE_DIR = Path(os.environ.get("TZPUSH_BENCH_STATE_DIR", REPO / ".local" / "bench"))
SECANTUS_VENV = REPO / ".local" / "secantus-venv"
TZPUSH = REPO / ".venv" / "bin" / "tzpush"
STOMP_PORT = int(os.environ.get("TZPUSH_BENCH_STOMP_PORT", "61653"))
MONGO_PORT = int(os.environ.get("TZPUSH_BENCH_MONGO_PORT", "27057"))
FAKE_PORT = int(os.environ.get("TZPUSH_BENCH_FAKE_PORT", "18795"))
DATABASE = "tzpush_bench"
Doc = dict[str, Any]


def free_port() -> int:
    """A TCP port free on loopback now (for a child's metrics or the API)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (and its reaped children) from /proc, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(fields[i]) for i in (11, 12)) / ticks


@dataclass
class Proc:
    """A tzpush subprocess we started (consumer, creator service or fake)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0

    def start(self) -> Proc:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        self.started_at = time.time()
        self.popen = subprocess.Popen(
            self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO
        )
        out.close()
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def cpu(self) -> float:
        return cpu_seconds(self.pid) if self.alive() else 0.0

    def peak_rss_mb(self) -> float | None:
        """The process's own peak RSS so far (``VmHWM``: the high-water mark of its memory since
        its ``exec``; unlike ``ru_maxrss`` it does not include the peak of the bench it was
        forked from)."""
        try:
            with open(f"/proc/{self.pid}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            return None
        return None

    def stop(self, timeout: float = 40.0) -> None:
        if not self.alive():
            return
        assert self.popen is not None
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()

    def kill9(self) -> None:
        if self.alive():
            assert self.popen is not None
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(10)

    def log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def wait_log(self, needle: str, timeout: float = 60.0, after: int = 0) -> float:
        """Wait until a log line (from line ``after`` on) contains needle; return the time."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(needle in line for line in self.log_lines()[after:]):
                return time.time()
            if not self.alive():
                raise RuntimeError(f"{self.name} exited: {self.log_lines()[-5:]}")
            time.sleep(0.05)
        raise TimeoutError(f"{self.name}: no {needle!r} in its log after {timeout} s")


class Fake:
    """``tzpush fake-expo`` as a subprocess, read over HTTP."""

    def __init__(self, log_dir: Path, port: int = FAKE_PORT) -> None:
        self.url = f"http://127.0.0.1:{port}"
        argv = [str(TZPUSH), "fake-expo", "--port", str(port), "--rate", "0", "--no-auth"]
        argv += ["--receipt-delay", "0", "--max-records", "400000"]
        self.proc = Proc("fake-expo", argv, dict(os.environ), log_dir / "fake-expo.log")

    def start(self) -> Fake:
        self.proc.start()
        deadline = time.time() + 30
        while time.time() < deadline:
            with contextlib.suppress(OSError):
                self._call("GET", "/healthz")
                return self
            time.sleep(0.1)
        raise RuntimeError(f"fake Expo did not start: {self.proc.log_lines()[-5:]}")

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())

    def pushes(self) -> list[Doc]:
        return list(self._call("GET", "/_fake/pushes"))

    def stats(self) -> Doc:
        return dict(self._call("GET", "/_fake/stats"))

    def reset(self, **config: Any) -> None:
        """Forget pushes and counters; set faults (rate_per_second, error_rate...)."""
        self._call("DELETE", "/_fake/pushes")
        self._call("POST", "/_fake/config", {"rate_per_second": 0, "error_rate": 0, **config})

    def stop(self) -> None:
        self.proc.stop(10)


@dataclass
class BenchStack:
    """The running bench stack; ``env()`` gives tzpush subprocesses their settings."""

    local: LocalStack
    settings: Settings
    fake: Fake
    client: pymongo.MongoClient[Doc]
    log_dir: Path
    procs: list[Proc] = field(default_factory=list)
    dbname: str = DATABASE

    @property
    def db(self) -> Database[Doc]:
        return self.client[self.dbname]

    def settings_for(self, prefix: str, *, lead: float = 15.0, rate: float = 100000.0) -> Settings:
        s = self.settings
        return s.model_copy(
            update={
                "mongo": s.mongo.model_copy(update={"database": self.dbname}),
                "stomp": s.stomp.model_copy(update={"queue_prefix": prefix}),
                "wakeup": s.wakeup.model_copy(update={"lead_seconds": lead}),
                "expo": s.expo.model_copy(update={"rate_per_second": rate}),
            }
        )

    def env(self, settings: Settings, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TZPUSH_")}
        env.update(
            TZPUSH_MONGO__URI=settings.mongo.uri.get_secret_value(),
            TZPUSH_MONGO__DATABASE=self.dbname,
            TZPUSH_STOMP__PORT=str(STOMP_PORT),
            TZPUSH_STOMP__QUEUE_PREFIX=settings.stomp.queue_prefix,
            TZPUSH_EXPO__BASE_URL=self.fake.url,
            TZPUSH_EXPO__RATE_PER_SECOND=str(settings.expo.rate_per_second),
            TZPUSH_WAKEUP__LEAD_SECONDS=str(settings.wakeup.lead_seconds),
            TZPUSH_OUTCOMES__RECEIPTS_DELAY_S="3600",
            TZPUSH_METRICS__PORT="0",
            TZPUSH_LOCAL__STATE_DIR=str(STATE_DIR),
            TZPUSH_LOG_JSON="true",
            TZPUSH_LOG_LEVEL="INFO",
        )
        env.update(extra)
        return env

    def consumer(self, settings: Settings, name: str = "consumer", **extra: str) -> Proc:
        argv = [str(TZPUSH), "consumer"]
        p = Proc(name, argv, self.env(settings, **extra), self.log_dir / f"{name}.log")
        self.procs.append(p)
        return p.start()

    def creator(self, settings: Settings, name: str = "creator", **extra: str) -> Proc:
        argv = [str(TZPUSH), "creator"]
        p = Proc(name, argv, self.env(settings, **extra), self.log_dir / f"{name}.log")
        self.procs.append(p)
        return p.start()

    def broker(self, settings: Settings) -> StompClient:
        return StompClient(settings).connect()

    def wipe(self, name: str = DATABASE, *, fresh_server: bool = True) -> None:
        """Start the scenario on a fresh database, by default on a freshly started server.

        The MongoDB-compatible server used here is one Python process that slows down as
        earlier scenarios fill it (measured: a restarted consumer's 1,000 guard inserts took
        0.57 s right after the 10,000 herd, about 0.17 s on a new server), so each scenario
        gets a new one and its figures do not depend on what ran before. Dropping the old
        databases instead would take minutes (SecantusDB drops big collections key by key).
        """
        if fresh_server:
            self.local.stop("mongo")
            shutil.rmtree(self.local.data_dir("mongo"), ignore_errors=True)
            self.local.start("mongo")
        self.dbname = f"{DATABASE}_{name}"
        dbm.ensure_indexes(self.db)

    def snapshot(self, name: str) -> float:
        """Keep a copy of the database server's files under ``name`` (the server is stopped for
        the copy and started again); return the seconds it took. Seeding 1M reminders takes the
        server here 7 to 20 minutes; a copy of its files a few seconds."""
        t = time.perf_counter()
        self.local.stop("mongo")
        dst = self.snapshot_dir(name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(self.local.data_dir("mongo"), dst)
        self.local.start("mongo")
        return time.perf_counter() - t

    def restore(self, name: str, dbname: str) -> float:
        """A freshly started server on a copy of snapshot ``name``, using database ``dbname``;
        return the seconds it took."""
        t = time.perf_counter()
        self.local.stop("mongo")
        data = self.local.data_dir("mongo")
        shutil.rmtree(data, ignore_errors=True)
        shutil.copytree(self.snapshot_dir(name), data)
        self.local.start("mongo")
        self.dbname = dbname
        return time.perf_counter() - t

    def drop_snapshot(self, name: str) -> None:
        shutil.rmtree(self.snapshot_dir(name), ignore_errors=True)

    def snapshot_dir(self, name: str) -> Path:
        """Where snapshot ``name`` is kept; a name with a ``/`` is a directory of its own (a
        copy kept by hand, e.g. ``--scale-seeded``)."""
        return Path(name) if "/" in name else STATE_DIR / "snapshots" / name

    def scheduler_bytes(self) -> int:
        return dir_bytes(self.local.data_dir("activemq") / "scheduler")


def dir_bytes(path: Path) -> int:
    """Disk usage (allocated blocks, like du) of a directory tree."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, f)).st_blocks * 512
    return total


@contextlib.contextmanager
def bench_stack(log_dir: Path) -> Iterator[BenchStack]:
    """Start a fresh stack and fake; stop everything we started at the end (also on failure)."""
    settings = Settings.load(
        mongo={"uri": f"mongodb://127.0.0.1:{MONGO_PORT}/?directConnection=true"},
        stomp={"host": "127.0.0.1", "port": STOMP_PORT, "queue_prefix": "bench"},
        local={"state_dir": str(STATE_DIR)},
        metrics={"port": 0},
    )
    config = StackConfig.from_settings(settings, venv_dir=SECANTUS_VENV)
    local = LocalStack(config, die_with_parent=True)
    local.down()
    for name in ("activemq", "mongo"):
        shutil.rmtree(STATE_DIR / name, ignore_errors=True)
    ensure_installed(config)
    fake = Fake(log_dir)
    stack: BenchStack | None = None
    try:
        local.up()
        fake.start()
        client: pymongo.MongoClient[Doc] = pymongo.MongoClient(
            settings.mongo.uri.get_secret_value(), tz_aware=True, serverSelectionTimeoutMS=30000
        )
        settings = settings.model_copy(
            update={"mongo": settings.mongo.model_copy(update={"database": DATABASE})}
        )
        stack = BenchStack(local, settings, fake, client, log_dir)
        stack.wipe(fresh_server=False)
        yield stack
    finally:
        if stack is not None:
            for p in stack.procs:
                p.stop(10)
            stack.client.close()
        fake.stop()
        local.down()


def interpreters() -> dict[str, str]:
    """Which Python ran tzpush and which ran the database server: figures depend on it (a build
    without PGO and LTO measured 25 to 35% slower here; docs/performance.md)."""
    out = {"tzpush": f"{sys.version.split()[0]} {Path(sys.base_prefix) / 'bin'}"}
    try:
        cfg = dict(
            line.split(" = ", 1)
            for line in (SECANTUS_VENV / "pyvenv.cfg").read_text().splitlines()
            if " = " in line
        )
        out["database"] = f"{cfg.get('version', '?')} {cfg.get('home', '?')}"
    except OSError:
        out["database"] = "unknown (no SecantusDB venv yet)"
    return out
