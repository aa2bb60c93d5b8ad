"""`LocalStack`: start, stop, crash and inspect the local ActiveMQ and SecantusDB of one state dir.

The Python API the test fixtures, the bench and the demo use, and what `tzpush services
up|down|status|restart` runs. It owns the lifecycle only (pid files, the state dir's lock, waiting
until ready, SIGTERM then SIGKILL); the command lines, the probes, the installation and the
configuration are modules of their own, so this one reads as the rules of who may stop what.

Facts this relies on (measured, see docs/notes/activemq.md and docs/notes/mongodb.md): the
broker is ready when a STOMP CONNECT gets CONNECTED, not when the port opens; SIGTERM stops it in
~2 s and SIGKILL loses no scheduled job. SecantusDB is ready when it answers ``ping`` and exits
~3.4 s after SIGTERM.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.config import (
    BROKERS,
    STANDBY,
    PortTakenError,
    ServiceError,
    StackConfig,
    check_service,
)
from devstack.probes import mongo_ready, port_in_use, stomp_ready
from devstack.processes import (
    Launch,
    activemq_command,
    die_with_parent_preexec,
    log_tail,
    mongo_command,
    pid_alive,
    pid_cmdline,
)
from shared.settings import Settings


@dataclass
class ServiceStatus:
    name: str
    pid: int | None
    host: str
    port: int
    # running | standby | not ready | stopped | stale pid file | port taken by another process
    state: str


@dataclass
class LocalStack:
    """Start, stop, crash and inspect the local ActiveMQ and SecantusDB of one state dir.

    ``die_with_parent=True`` (test fixtures) makes the children exit if this process dies;
    the CLI leaves them running detached.
    """

    config: StackConfig
    die_with_parent: bool = False
    start_timeout: float = 90.0
    stop_timeout: float = 20.0
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    # Where each broker's activemq.log ended when we started it: its standby line is news only
    # after that (the log is appended to, and a run stopped as standby ends with that line).
    _log_from: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings, **config_overrides: Any) -> LocalStack:
        return cls(StackConfig.from_settings(settings, **config_overrides))

    # paths -------------------------------------------------------------------------------------
    @property
    def state_dir(self) -> Path:
        return self.config.state_dir

    def pid_file(self, name: str) -> Path:
        return self.state_dir / f"{name}.pid"

    def data_dir(self, name: str) -> Path:
        return self.state_dir / name / "data"

    def log_file(self, name: str) -> Path:
        return self.state_dir / name / f"{name}.out"

    @property
    def services(self) -> tuple[str, ...]:
        """What `up` starts, in order: the broker (or the pair), then the database."""
        return (*self.config.brokers, "mongo")

    def address(self, name: str) -> tuple[str, int]:
        check_service(name)
        if name == STANDBY:
            if self.config.stomp_port_b is None:
                raise ServiceError("no broker pair configured (TZPUSH_STOMP__ENDPOINTS)")
            return self.config.stomp_host, self.config.stomp_port_b
        if name == "activemq":
            return self.config.stomp_host, self.config.stomp_port
        return self.config.mongo_host, self.config.mongo_port

    # state -------------------------------------------------------------------------------------
    def pid(self, name: str) -> int | None:
        """The pid of our running `name`, or None (a stale pid file is removed)."""
        check_service(name)
        proc = self._procs.get(name)
        if proc is not None and proc.poll() is not None:
            del self._procs[name]  # reaped: a kill -9'd child is not left a zombie
        try:
            pid = int(self.pid_file(name).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        # The cmdline check guards against a recycled pid: never signal someone else's process.
        if pid_alive(pid) and str(self.data_dir(name)) in pid_cmdline(pid):
            return pid
        self.pid_file(name).unlink(missing_ok=True)
        return None

    def ready(self, name: str, timeout: float = 2.0) -> bool:
        host, port = self.address(name)
        if name in BROKERS:
            c = self.config
            return stomp_ready(host, port, c.stomp_login, c.stomp_passcode, timeout)
        return mongo_ready(host, port, timeout)

    def standby(self, name: str) -> bool:
        """True when our broker `name` runs as a pair's standby: alive, waiting for the store's
        lock (its log says so), not answering STOMP."""
        if self.pid(name) is None or self.ready(name, timeout=1.0):
            return False
        try:
            with open(self._broker_log(name), "rb") as fh:
                fh.seek(max(self._log_from.get(name, 0), fh.seek(0, 2) - 20_000))
                tail = fh.read().decode(errors="replace")
        except OSError:
            return False
        waiting = tail.rfind("is locked by another server")
        return waiting >= 0 and tail.rfind("Apache ActiveMQ", waiting) < 0

    def _broker_log(self, name: str) -> Path:
        return self.data_dir(name) / "activemq.log"

    def active(self) -> str | None:
        """The broker of this stack that answers STOMP now (a pair: the one holding the lock)."""
        return next((b for b in self.config.brokers if self.ready(b, timeout=1.0)), None)

    def status(self) -> list[ServiceStatus]:
        rows = []
        for name in self.services:
            host, port = self.address(name)
            stale = self.pid_file(name).exists()
            pid = self.pid(name)
            if pid is not None:
                state = "running" if self.ready(name, timeout=1.0) else "not ready"
                if state == "not ready" and name in BROKERS and self.standby(name):
                    state = "standby"
            elif port_in_use(host, port):
                state = "port taken by another process"
            else:
                state = "stale pid file" if stale else "stopped"
            rows.append(ServiceStatus(name, pid, host, port, state))
        return rows

    # start -------------------------------------------------------------------------------------
    def start(self, name: str) -> bool:
        """Start `name` and wait until it is ready. False when it was already running."""
        check_service(name)
        with self._lock():
            if self.pid(name) is not None:
                return False
            host, port = self.address(name)
            if port_in_use(host, port):
                raise PortTakenError(
                    f"port {port} on {host} is already in use by a process that "
                    f"`tzpush services` did not start (no live pid file in {self.state_dir}); "
                    f"stop it or choose another port for {name}"
                )
            argv, env, cwd = self._command(name)
            if name in BROKERS:
                log_path = self._broker_log(name)
                self._log_from[name] = log_path.stat().st_size if log_path.exists() else 0
            log = self.log_file(name)
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=die_with_parent_preexec if self.die_with_parent else None,
                )
            self._procs[name] = proc
            self.pid_file(name).write_text(f"{proc.pid}\n")
        self._wait_ready(name, proc)
        return True

    def up(self, names: Sequence[str] | None = None) -> dict[str, bool]:
        """Start every service not running yet (default: `services`); {name: started_now}."""
        return {name: self.start(name) for name in names or self.services}

    def _command(self, name: str) -> Launch:
        if name in BROKERS:
            # A pair's brokers share the first one's store: whoever holds its lock is active.
            return activemq_command(
                self.config,
                self.state_dir / name / "base",
                self.data_dir(name),
                port=self.address(name)[1],
                store=self.data_dir("activemq"),
            )
        return mongo_command(self.config, self.state_dir / "mongo", self.data_dir("mongo"))

    def _wait_ready(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_file(name).unlink(missing_ok=True)
                self._procs.pop(name, None)
                raise ServiceError(
                    f"{name} exited with code {proc.returncode} while starting; "
                    f"last lines of {self.log_file(name)}:\n{log_tail(self.log_file(name))}"
                )
            if self.ready(name, timeout=1.0):
                return
            if self.config.pair and name in BROKERS and self.standby(name):
                return  # the pair's other broker holds the store: this one waits as standby
            time.sleep(0.2)
        self.stop(name)
        raise ServiceError(
            f"{name} was not ready after {self.start_timeout:.0f} s; "
            f"see {self.log_file(name)}:\n{log_tail(self.log_file(name))}"
        )

    # stop --------------------------------------------------------------------------------------
    def stop(self, name: str, timeout: float | None = None) -> int | None:
        """SIGTERM our `name` (pid file), SIGKILL after `timeout`; the pid stopped, or None."""
        pid = self.pid(name)
        if pid is None:
            return None
        self._signal(pid, signal.SIGTERM)
        if not self._wait_gone(name, pid, self.stop_timeout if timeout is None else timeout):
            self._signal(pid, signal.SIGKILL)
            self._wait_gone(name, pid, 10.0)
        self.pid_file(name).unlink(missing_ok=True)
        return pid

    def kill9(self, name: str) -> int:
        """SIGKILL our `name` (crash drill) and wait until it is gone; returns the pid."""
        pid = self.pid(name)
        if pid is None:
            raise ServiceError(f"{name} is not running (no live pid file in {self.state_dir})")
        self._signal(pid, signal.SIGKILL)
        self._wait_gone(name, pid, 10.0)
        self.pid_file(name).unlink(missing_ok=True)
        return pid

    def restart(self, name: str) -> None:
        """Stop (gracefully) if running, then start again on the same data dir."""
        self.stop(name)
        self.start(name)

    def down(self) -> dict[str, int | None]:
        """Stop what our pid files name (in reverse start order); {name: pid or None}."""
        standby = (STANDBY,) if self.pid_file(STANDBY).exists() and not self.config.pair else ()
        return {name: self.stop(name) for name in reversed((*self.services, *standby))}

    def _signal(self, pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def _wait_gone(self, name: str, pid: int, timeout: float) -> bool:
        proc = self._procs.get(name)
        if proc is not None and proc.pid == pid:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            self._procs.pop(name, None)
            return True
        deadline = time.monotonic() + timeout
        while pid_alive(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / ".lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


# -- module-level conveniences (settings in, same semantics as LocalStack) -----------------------
def start_activemq(settings: Settings) -> bool:
    return LocalStack.from_settings(settings).start("activemq")


def start_mongo(settings: Settings) -> bool:
    return LocalStack.from_settings(settings).start("mongo")


def stop(settings: Settings, name: str | None = None) -> None:
    stack = LocalStack.from_settings(settings)
    if name is None:
        stack.down()
    else:
        stack.stop(name)


def kill9(settings: Settings, name: str) -> int:
    return LocalStack.from_settings(settings).kill9(name)


def restart(settings: Settings, name: str) -> None:
    LocalStack.from_settings(settings).restart(name)


def status(settings: Settings) -> list[ServiceStatus]:
    return LocalStack.from_settings(settings).status()
