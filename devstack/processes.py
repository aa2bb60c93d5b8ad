"""How each server of the local stack is launched, and how its process is watched from outside.

The command lines (ActiveMQ from its jar with our conf and a Debian classpath fix; SecantusDB from
its own venv) and the /proc reads that tell whether a pid is alive and ours. Separate from
`LocalStack`, which decides when to start and stop what, because these are the facts about the
two programs (docs/notes/activemq.md, docs/notes/mongodb.md) that change when a server's version or
packaging does, not when the stack's lifecycle does.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
from pathlib import Path

from devstack.config import ACTIVEMQ_HOME, ACTIVEMQ_JAR, MISSING_JARS, ServiceError, StackConfig
from devstack.install import secantus_binary

# argv, environment and working directory of one server process
Launch = tuple[list[str], dict[str, str], Path]


def die_with_parent_preexec() -> None:  # pragma: no cover - runs in the child between fork/exec
    # Linux PR_SET_PDEATHSIG: the child gets SIGTERM when the process that started it dies, so a
    # test session that is killed hard leaves no broker or database behind.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in {"Z", "X"}


def pid_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def activemq_command(
    c: StackConfig, base: Path, data: Path, *, port: int | None = None, store: Path | None = None
) -> Launch:
    """The broker run from its jar (not /usr/bin/activemq), `base` its activemq.base dir,
    listening on `port` (default ``c.stomp_port``) with its stores in `store` (default `data`;
    a pair's brokers share one)."""
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
        f"-Dtzpush.stomp.port={port or c.stomp_port}",
        f"-Dtzpush.store.dir={store or data}",
        "-jar",
        str(ACTIVEMQ_JAR),
        "start",
        f"xbean:file:{conf}/activemq.xml",
    ]
    return argv, _child_env(), base


def mongo_command(c: StackConfig, home: Path, data: Path) -> Launch:
    """SecantusDB's server from its own venv, its store in `data`, run from `home`."""
    binary = secantus_binary(c.secantus_venv)
    if not binary.exists():
        raise ServiceError(f"{binary} is missing: run `tzpush services install`")
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
    if c.mongo_test_commands:
        argv.append("--enable-test-commands")
    return argv, _child_env(), home


def _prop(value: str) -> str:
    """Escape a value for a Java .properties file."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):  # SecantusDB has its own venv
        env.pop(key, None)
    return env
