"""The system under a chaos run: database, broker, Expo fake and six tzpush processes.

The database and the broker are devstack's `LocalStack` on free loopback ports and a state dir
of the run's own; ``tzpush creator`` x2, ``tzpush consumer`` x2, ``tzpush receipts`` and
``tzpush api`` are started as the CLI starts them, each reaching the database and the broker
through its own `FaultProxy`; ``tzpush fake-expo`` answers for Expo. `Sut.do` applies one
fault and undoes it after its duration; `Sut.close` stops every process it started, by pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from api.keys import hash_key, new_key
from bench.chaos_faults import TZPUSH, Fault
from bench.chaos_proxy import FaultProxy
from bench.stack import REPO, SECANTUS_VENV
from bench.stack import TZPUSH as TZPUSH_BIN
from devstack.config import StackConfig
from devstack.stack import LocalStack

FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
DATABASE = "tzpush_chaos"
# Short grace windows and patience, so a run of minutes sees misses, ends and receipts.
GRACE = {"meal": 60, "mood": 90, "medication": 120}
SIGNING_KEY = "chaos-signing-key-0123456789"
SKIP_PORTS = set(range(59623, 65154)) | set(range(27027, 34158)) | {61613, 27017, 61653, 27057}


def free_port() -> int:
    """A free loopback port outside every range the other stacks of this machine use."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in SKIP_PORTS:
            return port


class Process:
    """One tzpush process of the run: started, signalled and restarted by pid."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.popen: subprocess.Popen[bytes] | None = None
        self.clock_offset_s = 0

    def start(self) -> None:
        env = dict(self.env)
        if self.clock_offset_s and not FAKETIME_LIB.exists():
            raise RuntimeError(f"no {FAKETIME_LIB}: apt-get install faketime (make install does)")
        if self.clock_offset_s:
            env.update(
                LD_PRELOAD=str(FAKETIME_LIB),
                FAKETIME=f"{self.clock_offset_s:+d}s",
                FAKETIME_DONT_FAKE_MONOTONIC="1",
            )
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(
                self.argv,
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def signal(self, sig: signal.Signals) -> None:
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)

    def wait(self, timeout: float) -> None:
        if self.popen is None:
            return
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            self.popen.wait(10)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


class Sut:
    """Everything a chaos run started; a context manager that stops it all at the end."""

    def __init__(self, run_dir: Path, seed: int) -> None:
        self.run_dir = run_dir
        self.logs = run_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        config = StackConfig(
            state_dir=run_dir / "stack",
            stomp_port=free_port(),
            mongo_port=free_port(),
            venv_dir=SECANTUS_VENV,
        )
        self.local = LocalStack(config, die_with_parent=True)
        self.mongo_uri = f"mongodb://127.0.0.1:{config.mongo_port}/?directConnection=true"
        self.fake_url = f"http://127.0.0.1:{free_port()}"
        self.api_url = f"http://127.0.0.1:{free_port()}"
        self.app_key, self.ops_key = new_key(), new_key()
        self.seed = seed
        self.procs: dict[str, Process] = {}
        self.proxies: dict[str, FaultProxy] = {}
        self.fake: Process | None = None
        self._locks = {name: threading.Lock() for name in (*TZPUSH, "mongo", "activemq")}
        # The database and the broker are started with PR_SET_PDEATHSIG, which fires when the
        # *thread* that started them ends: every restart is made by this one long-lived thread.
        self._starter = ThreadPoolExecutor(1, thread_name_prefix="chaos-starter")
        self._closing = threading.Event()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True)

    # -- start ---------------------------------------------------------------------------------
    def __enter__(self) -> Sut:
        try:
            self.local.up()
            port = self.fake_url.rsplit(":", 1)[1]
            argv = [
                str(TZPUSH_BIN),
                "fake-expo",
                "--port",
                port,
                "--rate",
                "0",
                "--no-auth",
                "--receipt-delay",
                "1",
                "--seed",
                str(self.seed),
                "--max-records",
                "400000",
            ]
            self.fake = Process("fake-expo", argv, dict(os.environ), self.logs / "fake-expo.log")
            self.fake.start()
            _wait_http(self.fake_url + "/healthz")
            for name in TZPUSH:
                self.procs[name] = self._process(name)
                self.procs[name].start()
            _wait_http(self.api_url + "/readyz")
            self._supervisor.start()
        except BaseException:
            self.close()
            raise
        return self

    def _process(self, name: str) -> Process:
        cfg = self.local.config
        mongo = FaultProxy(f"{name}>mongo", (cfg.mongo_host, cfg.mongo_port))
        broker = FaultProxy(f"{name}>activemq", (cfg.stomp_host, cfg.stomp_port))
        self.proxies[mongo.name], self.proxies[broker.name] = mongo, broker
        env = {k: v for k, v in os.environ.items() if not k.startswith("TZPUSH_")}
        env.update(
            TZPUSH_MONGO__URI=f"mongodb://127.0.0.1:{mongo.port}/?directConnection=true",
            TZPUSH_MONGO__DATABASE=DATABASE,
            TZPUSH_STOMP__HOST="127.0.0.1",
            TZPUSH_STOMP__PORT=str(broker.port),
            TZPUSH_STOMP__QUEUE_PREFIX="chaos",
            TZPUSH_STOMP__SIGNING_KEY=SIGNING_KEY,
            TZPUSH_EXPO__BASE_URL=self.fake_url,
            TZPUSH_EXPO__TIMEOUT_S="3",
            TZPUSH_CATEGORIES=json.dumps({c: {"grace_seconds": g} for c, g in GRACE.items()}),
            TZPUSH_CREATOR__INTERVAL_SECONDS="15",
            TZPUSH_CREATOR__LEASE_SECONDS="9",
            TZPUSH_WAKEUP__LEAD_SECONDS="5",
            TZPUSH_CREATOR__JANITOR_MARGIN_SECONDS="10",
            TZPUSH_SHUTDOWN__TIMEOUT_S="5",
            TZPUSH_OUTCOMES__RECEIPTS_DELAY_S="2",
            TZPUSH_CONSUMER__RECEIPTS_INTERVAL_S="3",
            TZPUSH_API__HOST="127.0.0.1",
            TZPUSH_API__PORT=self.api_url.rsplit(":", 1)[1],
            TZPUSH_API__RATE_PER_SECOND="2000",
            TZPUSH_API__BURST="4000",
            TZPUSH_API__KEYS=json.dumps(
                [
                    {"name": "chaos", "scope": "app", "sha256": hash_key(self.app_key)},
                    {"name": "chaos-ops", "scope": "ops", "sha256": hash_key(self.ops_key)},
                ]
            ),
            TZPUSH_METRICS__PORT="0",
            TZPUSH_LOCAL__STATE_DIR=str(self.run_dir / "stack"),
            TZPUSH_LOG_LEVEL="INFO",
            PYTHONUNBUFFERED="1",
        )
        command = name.split("-")[0]
        return Process(name, [str(TZPUSH_BIN), command], env, self.logs / f"{name}.log")

    def _supervise(self) -> None:
        """Restart a tzpush process that exited on its own (as ECS restarts a stopped task):
        e.g. one started while the database was down exits at once."""
        while not self._closing.wait(1.0):
            for name, proc in self.procs.items():
                lock = self._locks[name]
                if not proc.alive() and lock.acquire(blocking=False):
                    try:
                        if not self._closing.is_set() and not proc.alive():
                            proc.start()
                    finally:
                        lock.release()

    def _start_service(self, name: str) -> None:
        self._starter.submit(self.local.start, name).result()

    # -- faults --------------------------------------------------------------------------------
    def do(self, fault: Fault, started: float) -> dict[str, Any]:
        """Apply ``fault`` now, wait its duration, undo it; the fault as it happened."""
        t = time.time()
        kind, target = fault.kind, fault.target
        if kind in ("net_delay", "net_cut"):
            proxy = self.proxies[target]
            proxy.delay(fault.detail["delay_s"]) if kind == "net_delay" else proxy.cut()
            time.sleep(fault.duration)
            proxy.heal()
        elif kind.startswith("expo_"):
            self._expo(fault)
        elif target in ("mongo", "activemq"):
            self._service(fault)
        else:
            self._tzpush(fault)
        return {
            "kind": kind,
            "target": target,
            "start": t,
            "end": time.time(),
            "planned_at": started + fault.at,
            "detail": fault.detail,
        }

    def _service(self, fault: Fault) -> None:
        name = fault.target
        with self._locks[name]:
            pid = self.local.pid(name)
            if pid is None:
                return
            if fault.kind == "stop":
                os.kill(pid, signal.SIGSTOP)
                time.sleep(fault.duration)
                os.kill(pid, signal.SIGCONT)
                return
            if fault.kind == "kill9":
                self.local.kill9(name)
            else:
                self.local.stop(name, timeout=20)
            time.sleep(fault.duration)
            self._start_service(name)

    def _tzpush(self, fault: Fault) -> None:
        proc = self.procs[fault.target]
        with self._locks[fault.target]:
            if fault.kind == "stop":
                proc.signal(signal.SIGSTOP)
                time.sleep(fault.duration)
                proc.signal(signal.SIGCONT)
                return
            sig = signal.SIGKILL if fault.kind == "kill9" else signal.SIGTERM
            if fault.kind == "clock":
                sig = signal.SIGTERM
                proc.clock_offset_s = int(fault.detail["offset_s"])
            proc.signal(sig)
            proc.wait(15)
            if fault.kind != "clock":
                time.sleep(fault.duration)
            proc.start()
            if fault.kind == "clock":
                time.sleep(fault.duration)
                proc.signal(signal.SIGTERM)
                proc.wait(15)
                proc.clock_offset_s = 0
                proc.start()

    def _expo(self, fault: Fault) -> None:
        detail = dict(fault.detail)
        if fault.kind == "expo_dnr":
            pushes = httpx.get(self.fake_url + "/_fake/pushes", timeout=30).json()
            tokens = sorted({p["to"] for p in pushes})
            if not tokens:
                return
            token = tokens[int(detail["install"] * len(tokens))]
            fault.detail["token"] = token
            self._fake_config(dead_at_ticket=[token])
            time.sleep(fault.duration)
            self._fake_config(dead_at_ticket=[])
            return
        self._fake_config(**detail)
        time.sleep(fault.duration)
        self._fake_config(**NORMAL_EXPO)

    def _fake_config(self, **config: Any) -> None:
        httpx.post(self.fake_url + "/_fake/config", json=config, timeout=30).raise_for_status()

    def heal(self) -> None:
        """Every process running, every link whole, the Expo fake normal (before the drain)."""
        for proxy in self.proxies.values():
            proxy.heal()
        for name in ("mongo", "activemq"):
            pid = self.local.pid(name)
            if pid is not None:
                os.kill(pid, signal.SIGCONT)
            else:
                self._start_service(name)
        for proc in self.procs.values():
            proc.signal(signal.SIGCONT)
            if not proc.alive():
                proc.clock_offset_s = 0
                proc.start()
        self._fake_config(**NORMAL_EXPO, dead_at_ticket=[])

    # -- stop ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every process this run started (by pid), the proxies and the stack."""
        self._closing.set()
        if self._supervisor.is_alive():
            self._supervisor.join(timeout=5)
        for proc in self.procs.values():
            proc.signal(signal.SIGCONT)
            proc.signal(signal.SIGTERM)
        for proc in self.procs.values():
            proc.wait(15)
        if self.fake is not None:
            self.fake.signal(signal.SIGTERM)
            self.fake.wait(10)
        for proxy in self.proxies.values():
            proxy.close()
        for name in ("mongo", "activemq"):
            pid = self.local.pid(name)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        self.local.down()
        self._starter.shutdown(wait=True)

    def __exit__(self, *exc: object) -> None:
        self.close()


NORMAL_EXPO: dict[str, Any] = {
    "rate_per_second": 0,
    "error_rate": 0,
    "hang_after_accept_s": 0,
    "receipt_delay_s": 1,
}


def _wait_http(url: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer 200 within {timeout:.0f} s")
