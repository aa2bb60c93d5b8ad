"""The local stack: ActiveMQ (Debian's package) and SecantusDB, run as our own processes.

``tzpush services install|up|down|status|restart`` and the Python API the test fixtures and the
bench use (`LocalStack`, `StackConfig`, `ensure_installed`). Everything lives under the state dir
(``settings.local.state_dir``, default ``.local``)::

    STATE/activemq.pid, STATE/mongo.pid      pid files: `down` stops only what they name
    STATE/activemq/base/lib/                 xstream.jar + jettison.jar (Debian classpath fix)
    STATE/activemq/data/                     KahaDB, scheduler store, activemq.log
    STATE/mongo/data/, STATE/mongo/*.log     SecantusDB store and log
    STATE/secantus-venv/                     SecantusDB's own venv (GPL: a separate process, never
                                             imported)

Facts this relies on (measured, see notes/activemq.md and notes/mongodb.md): the broker is run
from its jar, not /usr/bin/activemq; it is ready when a STOMP CONNECT gets CONNECTED, not when the
port opens; SIGTERM stops it in ~2 s and SIGKILL loses no scheduled job. SecantusDB is ready when
it answers ``ping`` and exits ~3.4 s after SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import fcntl
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.errors import PermanentError, TzpushError
from shared.settings import Settings

SERVICES: tuple[str, ...] = ("activemq", "mongo")
REPO_ROOT = Path(__file__).resolve().parent.parent
ACTIVEMQ_CONF = REPO_ROOT / "activemq"
ACTIVEMQ_JAR = Path("/usr/share/activemq/bin/activemq.jar")
ACTIVEMQ_HOME = Path("/usr/share/activemq")
MISSING_JARS = (Path("/usr/share/java/xstream.jar"), Path("/usr/share/java/jettison.jar"))
SECANTUS_REQUIREMENT = "secantusdb>=0.7.0b3"
LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


class ServiceError(TzpushError):
    """The local stack could not be installed, started or stopped; the message says why."""


class PortTakenError(ServiceError, PermanentError):
    """A port the stack needs is used by a process we did not start."""


# -- configuration -------------------------------------------------------------------------------
@dataclass(frozen=True)
class StackConfig:
    """Where the local stack listens and keeps its files (all paths absolute)."""

    state_dir: Path
    stomp_host: str = "127.0.0.1"
    stomp_port: int = 61613
    mongo_host: str = "127.0.0.1"
    mongo_port: int = 27017
    stomp_login: str | None = None
    stomp_passcode: str | None = None
    venv_dir: Path | None = None  # default: STATE/secantus-venv
    conf_dir: Path = ACTIVEMQ_CONF
    java_heap: str = "256m"
    # SecantusDB fsyncs its log on every commit: a write acknowledged just before a kill -9 is
    # otherwise lost (measured: up to ~2 s of acked w:1 or w:majority writes; j:true survives).
    mongo_sync_on_commit: bool = True

    @property
    def secantus_venv(self) -> Path:
        return self.venv_dir or self.state_dir / "secantus-venv"

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> StackConfig:
        """Ports and hosts from settings; refuses anything that is not a loopback address."""
        mongo_host, mongo_port = parse_mongo_host(settings.mongo.uri.get_secret_value())
        stomp_host = settings.stomp.host
        if not is_loopback(stomp_host):
            raise ServiceError(
                f"TZPUSH_STOMP__HOST is {stomp_host!r}: the local stack only runs on loopback "
                "(127.0.0.1); point settings at 127.0.0.1 or manage that broker yourself"
            )
        passcode = settings.stomp.passcode
        values: dict[str, Any] = {
            "state_dir": Path(settings.local.state_dir).resolve(),
            "stomp_host": stomp_host,
            "stomp_port": settings.stomp.port,
            "mongo_host": mongo_host,
            "mongo_port": mongo_port,
            "stomp_login": settings.stomp.login,
            "stomp_passcode": passcode.get_secret_value() if passcode else None,
        }
        values.update(overrides)
        return cls(**values)


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_mongo_host(uri: str) -> tuple[str, int]:
    """The one loopback host and port of a ``mongodb://`` URI, or a ServiceError saying why not."""
    if not uri.startswith("mongodb://"):
        raise ServiceError(
            "TZPUSH_MONGO__URI is not a plain mongodb:// URI: the local stack serves only "
            "mongodb://127.0.0.1:PORT/"
        )
    rest = uri[len("mongodb://") :].split("/", 1)[0].split("?", 1)[0]
    hosts = rest.rsplit("@", 1)[-1].split(",")
    if len(hosts) != 1:
        raise ServiceError("TZPUSH_MONGO__URI names several hosts: the local stack is one server")
    hostport = hosts[0]
    if hostport.startswith("["):
        host, _, tail = hostport[1:].partition("]")
        port_text = tail.lstrip(":")
    else:
        host, _, port_text = hostport.partition(":")
    try:
        port = int(port_text) if port_text else 27017
    except ValueError:
        raise ServiceError(f"TZPUSH_MONGO__URI has a bad port {port_text!r}") from None
    if not is_loopback(host):
        raise ServiceError(
            f"TZPUSH_MONGO__URI points at {host!r}: the local stack only runs on loopback "
            "(127.0.0.1); use a mongodb://127.0.0.1:PORT/ URI or manage that server yourself"
        )
    return host, port


# -- installation --------------------------------------------------------------------------------
def _run(cmd: Sequence[str], **kwargs: Any) -> None:
    print("+ " + " ".join(cmd), flush=True)
    result = subprocess.run(list(cmd), check=False, **kwargs)
    if result.returncode != 0:
        raise ServiceError(f"command failed with exit code {result.returncode}: {' '.join(cmd)}")


def ensure_system_packages() -> None:
    """apt-get install activemq (and a JRE) only when they are missing. Idempotent."""
    packages = []
    if not ACTIVEMQ_JAR.exists() or not all(j.exists() for j in MISSING_JARS):
        packages.append("activemq")
    if shutil.which("java") is None:
        packages.append("default-jre-headless")
    if not packages:
        return
    apt = ["apt-get"] if os.geteuid() == 0 else ["sudo", "-n", "apt-get"]
    if os.geteuid() != 0 and shutil.which("sudo") is None:
        raise ServiceError(f"need root to install {' '.join(packages)}: run as root or install")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run([*apt, "update"], env=env)
    _run([*apt, "install", "-y", "--no-install-recommends", *packages], env=env)


def secantus_binary(venv_dir: Path) -> Path:
    return venv_dir / "bin" / "secantusd-py"


def ensure_secantus(venv_dir: Path) -> Path:
    """Create SecantusDB's own venv when its server binary is missing. Idempotent."""
    binary = secantus_binary(venv_dir)
    if binary.exists():
        return binary
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    # This interpreter made the project's venv, so it can make one (python3 may lack ensurepip).
    _run([sys.executable, "-m", "venv", str(venv_dir)])
    _run(
        [str(venv_dir / "bin" / "pip"), "install", "--quiet", "--pre", SECANTUS_REQUIREMENT],
    )
    if not binary.exists():
        raise ServiceError(f"{SECANTUS_REQUIREMENT} installed but {binary} is missing")
    return binary


def ensure_installed(config: StackConfig) -> None:
    """Everything `up` needs: the activemq package, a JRE and the SecantusDB venv."""
    ensure_system_packages()
    ensure_secantus(config.secantus_venv)


# -- processes -----------------------------------------------------------------------------------
def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # Linux PR_SET_PDEATHSIG: the child gets SIGTERM when the process that started it dies, so a
    # test session that is killed hard leaves no broker or database behind.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in {"Z", "X"}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def port_in_use(host: str, port: int) -> bool:
    """True when something listens on or holds host:port (bind test, like the servers do)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        if probe.connect_ex((host, port)) == 0:
            return True
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def stomp_ready(
    host: str,
    port: int,
    login: str | None = None,
    passcode: str | None = None,
    timeout: float = 2.0,
) -> bool:
    """One STOMP CONNECT; True when the broker answers CONNECTED (an open port is not enough)."""
    headers = ["accept-version:1.2", "host:localhost"]
    if login:
        headers += [f"login:{login}", f"passcode:{passcode or ''}"]
    frame = ("CONNECT\n" + "\n".join(headers) + "\n\n\0").encode()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(frame)
            reply = b""
            while b"\0" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                reply += chunk
            ok = reply.lstrip(b"\r\n").startswith(b"CONNECTED")
            if ok:
                with contextlib.suppress(OSError):
                    sock.sendall(b"DISCONNECT\n\n\0")
            return ok
    except OSError:
        return False


def mongo_ready(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the server answers ``ping`` (directConnection: it calls itself a replica set)."""
    import pymongo  # local: the CLI's other commands do not need the driver loaded

    ms = int(timeout * 1000)
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        host, port, directConnection=True, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms
    )
    try:
        client.admin.command("ping")
        return True
    except pymongo.errors.PyMongoError:
        return False
    finally:
        client.close()


@dataclass
class ServiceStatus:
    name: str
    pid: int | None
    host: str
    port: int
    state: str  # running | not ready | stopped | stale pid file | port taken by another process


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

    def address(self, name: str) -> tuple[str, int]:
        _check(name)
        if name == "activemq":
            return self.config.stomp_host, self.config.stomp_port
        return self.config.mongo_host, self.config.mongo_port

    # state -------------------------------------------------------------------------------------
    def pid(self, name: str) -> int | None:
        """The pid of our running `name`, or None (a stale pid file is removed)."""
        _check(name)
        proc = self._procs.get(name)
        if proc is not None and proc.poll() is not None:
            del self._procs[name]  # reaped: a kill -9'd child is not left a zombie
        try:
            pid = int(self.pid_file(name).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        # The cmdline check guards against a recycled pid: never signal someone else's process.
        if _alive(pid) and str(self.data_dir(name)) in _cmdline(pid):
            return pid
        self.pid_file(name).unlink(missing_ok=True)
        return None

    def ready(self, name: str, timeout: float = 2.0) -> bool:
        host, port = self.address(name)
        if name == "activemq":
            c = self.config
            return stomp_ready(host, port, c.stomp_login, c.stomp_passcode, timeout)
        return mongo_ready(host, port, timeout)

    def status(self) -> list[ServiceStatus]:
        rows = []
        for name in SERVICES:
            host, port = self.address(name)
            stale = self.pid_file(name).exists()
            pid = self.pid(name)
            if pid is not None:
                state = "running" if self.ready(name, timeout=1.0) else "not ready"
            elif port_in_use(host, port):
                state = "port taken by another process"
            else:
                state = "stale pid file" if stale else "stopped"
            rows.append(ServiceStatus(name, pid, host, port, state))
        return rows

    # start -------------------------------------------------------------------------------------
    def start(self, name: str) -> bool:
        """Start `name` and wait until it is ready. False when it was already running."""
        _check(name)
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
            argv, env, cwd = (
                self._activemq_command() if name == "activemq" else self._mongo_command()
            )
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
                    preexec_fn=_die_with_parent if self.die_with_parent else None,
                )
            self._procs[name] = proc
            self.pid_file(name).write_text(f"{proc.pid}\n")
        self._wait_ready(name, proc)
        return True

    def up(self, names: Sequence[str] = SERVICES) -> dict[str, bool]:
        """Start every service not running yet; {name: started_now}."""
        return {name: self.start(name) for name in names}

    def _wait_ready(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_file(name).unlink(missing_ok=True)
                self._procs.pop(name, None)
                raise ServiceError(
                    f"{name} exited with code {proc.returncode} while starting; "
                    f"last lines of {self.log_file(name)}:\n{_tail(self.log_file(name))}"
                )
            if self.ready(name, timeout=1.0):
                return
            time.sleep(0.2)
        self.stop(name)
        raise ServiceError(
            f"{name} was not ready after {self.start_timeout:.0f} s; "
            f"see {self.log_file(name)}:\n{_tail(self.log_file(name))}"
        )

    def _activemq_command(self) -> tuple[list[str], dict[str, str], Path]:
        c = self.config
        base, data = self.state_dir / "activemq" / "base", self.data_dir("activemq")
        conf = c.conf_dir.resolve()
        if not (conf / "activemq.xml").exists():
            raise ServiceError(f"{conf}/activemq.xml is missing (run from the repository)")
        if not ACTIVEMQ_JAR.exists():
            raise ServiceError(f"{ACTIVEMQ_JAR} is missing: run `tzpush services install`")
        (base / "lib").mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        for jar in MISSING_JARS:  # Debian bug: installed but not on the broker's classpath
            link = base / "lib" / jar.name
            if not link.is_symlink():
                link.symlink_to(jar)
        creds = data / "credentials.properties"
        if c.stomp_login:
            # In a 0600 file, never on the command line (ps shows it to every user).
            creds.touch(mode=0o600)
            creds.chmod(0o600)
            creds.write_text(
                "tzpush.auth.anonymous=false\n"
                f"tzpush.stomp.login={_prop(c.stomp_login)}\n"
                f"tzpush.stomp.passcode={_prop(c.stomp_passcode or '')}\n"
            )
        else:
            creds.unlink(missing_ok=True)
        java = shutil.which("java")
        if java is None:
            raise ServiceError("java is missing: run `tzpush services install`")
        argv = [
            java,
            "-Xms64m",
            f"-Xmx{c.java_heap}",
            "-XX:+UseSerialGC",
            f"-Dactivemq.home={ACTIVEMQ_HOME}",
            f"-Dactivemq.base={base}",
            f"-Dactivemq.conf={conf}",
            f"-Dactivemq.data={data}",
            f"-Dactivemq.classpath={conf}",
            f"-Dlog4j.configuration=file:{conf}/log4j.properties",
            f"-Dtzpush.stomp.host={c.stomp_host}",
            f"-Dtzpush.stomp.port={c.stomp_port}",
            "-jar",
            str(ACTIVEMQ_JAR),
            "start",
            f"xbean:file:{conf}/activemq.xml",
        ]
        return argv, _child_env(), base

    def _mongo_command(self) -> tuple[list[str], dict[str, str], Path]:
        c = self.config
        binary = secantus_binary(c.secantus_venv)
        if not binary.exists():
            raise ServiceError(f"{binary} is missing: run `tzpush services install`")
        home, data = self.state_dir / "mongo", self.data_dir("mongo")
        data.mkdir(parents=True, exist_ok=True)
        config = home / "secantusd.toml"  # explicit and empty: no auto-discovered config files
        config.touch()
        argv = [
            str(binary),
            "--config",
            str(config),
            "--host",
            c.mongo_host,
            "--port",
            str(c.mongo_port),
            "--storage-path",
            str(data),
            "--log-level",
            "WARNING",
        ]
        if c.mongo_sync_on_commit:
            argv.append("--sync-on-commit")
        return argv, _child_env(), home

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
        return {name: self.stop(name) for name in reversed(SERVICES)}

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
        while _alive(pid):
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


def _check(name: str) -> None:
    if name not in SERVICES:
        raise ServiceError(f"unknown service {name!r}; one of {', '.join(SERVICES)}")


def _prop(value: str) -> str:
    """Escape a value for a Java .properties file."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):  # SecantusDB has its own venv
        env.pop(key, None)
    return env


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


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


# -- CLI -----------------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "services",
        help="the local stack: ActiveMQ + SecantusDB",
        description="Install, start, stop and inspect the local ActiveMQ and SecantusDB "
        "(ports from TZPUSH_STOMP__PORT and TZPUSH_MONGO__URI, files under "
        "TZPUSH_LOCAL__STATE_DIR).",
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    up = sub.add_parser("up", help="install if needed, start what is not running, wait ready")
    up.add_argument("--install-only", action="store_true", help="install, start nothing")
    up.add_argument("service", nargs="*", help=f"any of {', '.join(SERVICES)} (default: all)")
    up.set_defaults(func=_cmd_up)
    sub.add_parser("down", help="stop what `up` started").set_defaults(func=_cmd_down)
    sub.add_parser("status", help="a table of service, pid, port, state").set_defaults(
        func=_cmd_status
    )
    sub.add_parser("install", help="apt activemq + SecantusDB venv, if missing").set_defaults(
        func=_cmd_install
    )
    rs = sub.add_parser("restart", help="stop then start one service on the same data")
    rs.add_argument("service", choices=SERVICES)
    rs.set_defaults(func=_cmd_restart)


def _cmd_install(args: argparse.Namespace, settings: Settings) -> int:
    config = StackConfig.from_settings(settings)
    ensure_installed(config)
    print(f"installed: activemq ({ACTIVEMQ_JAR}), SecantusDB ({config.secantus_venv})")
    return 0


def _cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    stack = LocalStack.from_settings(settings)
    ensure_installed(stack.config)
    if args.install_only:
        print("installed; nothing started (--install-only)")
        return 0
    names = args.service or SERVICES
    for name in names:
        _check(name)
    for name in names:
        host, port = stack.address(name)
        started = stack.start(name)
        word = "started" if started else "already running"
        print(f"{name}: {word} (pid {stack.pid(name)}, {host}:{port})")
    return 0


def _cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    # Only the state dir matters to `down` (pid files), so it works whatever the URIs say.
    stack = LocalStack(StackConfig(state_dir=Path(settings.local.state_dir).resolve()))
    for name, pid in stack.down().items():
        print(f"{name}: stopped (pid {pid})" if pid else f"{name}: not running")
    return 0


def _cmd_restart(args: argparse.Namespace, settings: Settings) -> int:
    stack = LocalStack.from_settings(settings)
    stack.restart(args.service)
    print(f"{args.service}: restarted (pid {stack.pid(args.service)})")
    return 0


def _cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from rich.console import Console
    from rich.table import Table

    stack = LocalStack.from_settings(settings)
    table = Table(title=f"tzpush local stack ({stack.state_dir})")
    for column in ("service", "pid", "address", "state"):
        table.add_column(column)
    rows = stack.status()
    for row in rows:
        colour = "green" if row.state == "running" else "yellow"
        pid = str(row.pid) if row.pid else "-"
        table.add_row(row.name, pid, f"{row.host}:{row.port}", f"[{colour}]{row.state}[/]")
    Console().print(table)
    return 0 if all(r.state == "running" for r in rows) else 3
