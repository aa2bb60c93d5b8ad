"""The real broker (Debian's ActiveMQ) with activemq/activemq.xml: who may CONNECT.

Each test starts its own broker on a free port, in a temporary data dir, away from the session
stack: through the image's entrypoint (activemq/docker-entrypoint.sh, with the real `java`), or
through the local stack's own command line (devstack) bound to a non-loopback address.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.config import ACTIVEMQ_JAR, StackConfig
from devstack.processes import activemq_command

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "activemq" / "docker-entrypoint.sh"
START_TIMEOUT_S = 60.0
LOGIN, PASSCODE = "amq-user", "s3cret-Passcode"

pytestmark = pytest.mark.skipif(
    not ACTIVEMQ_JAR.exists() or shutil.which("java") is None or shutil.which("sh") is None,
    reason="Debian's activemq (and java, sh) not installed: tzpush services install",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _connect(port: int, login: str | None = None, passcode: str | None = None) -> str:
    """The command of the broker's answer to a STOMP CONNECT ("CONNECTED", "ERROR"), or "".

    Asked up to three times while the answer is "": a refusal closes the connection right after
    its ERROR frame, and on a loaded machine the reset can come before the frame is read
    (seen once in a full run: the empty passcode's answer was "")."""
    for _ in range(3):
        answer = _connect_once(port, login, passcode)
        if answer:
            return answer
        time.sleep(0.5)
    return ""


def _connect_once(port: int, login: str | None, passcode: str | None) -> str:
    headers = ["accept-version:1.2", "host:localhost"]
    if login is not None:
        headers += [f"login:{login}", f"passcode:{passcode or ''}"]
    frame = ("CONNECT\n" + "\n".join(headers) + "\n\n\0").encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
            sock.sendall(frame)
            reply = b""
            while b"\0" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
    except OSError:
        return ""
    return reply.lstrip(b"\r\n").split(b"\n", 1)[0].decode(errors="replace")


@contextlib.contextmanager
def _broker(argv: list[str], env: dict[str, str], cwd: Path, port: int) -> Iterator[None]:
    """Run the broker until any CONNECT gets an answer; SIGTERM (then SIGKILL) at the end."""
    log = cwd / "broker.out"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _connect(port, LOGIN, PASSCODE):
            if proc.poll() is not None:
                pytest.fail(f"broker exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"broker not answering after {START_TIMEOUT_S} s")
            time.sleep(0.3)
        yield
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


# 127.0.0.1, then ::1 and ::ffff:127.0.0.1 (Java's IPv6 socket), as /proc/net/tcp{,6} write them.
LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


def _listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp{,6} write them) listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                address, _, hexport = fields[1].partition(":")
                if fields[3] == "0A" and int(hexport, 16) == port:  # 0A = LISTEN
                    found.add(address)
    return found


def _entrypoint(tmp_path: Path, port: int, **env: str) -> tuple[list[str], dict[str, str]]:
    (tmp_path / "data").mkdir(exist_ok=True)
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ACTIVEMQ_CONF": str(REPO / "activemq"),
        "ACTIVEMQ_BASE": str(tmp_path / "base"),
        "ACTIVEMQ_DATA": str(tmp_path / "data"),
        "STOMP_PORT": str(port),
        "JAVA_OPTS": "-Xms32m -Xmx128m -XX:+UseSerialGC",
        **env,
    }
    return ["sh", str(ENTRYPOINT)], full


def test_image_with_credentials_refuses_anonymous_and_wrong_passcodes(tmp_path: Path) -> None:
    port = _free_port()
    argv, env = _entrypoint(
        tmp_path, port, TZPUSH_STOMP__LOGIN=LOGIN, TZPUSH_STOMP__PASSCODE=PASSCODE
    )
    with _broker(argv, env, tmp_path, port):
        assert _connect(port, LOGIN, PASSCODE) == "CONNECTED"
        assert _connect(port) == "ERROR", "anonymous CONNECT accepted"
        assert _connect(port, LOGIN, "wrong") == "ERROR"
        assert _connect(port, "tzpush", "tzpush") == "ERROR", "the old default user works"
        assert _connect(port, LOGIN, "") == "ERROR"


def test_image_loopback_only_serves_anonymous_on_127_0_0_1(tmp_path: Path) -> None:
    port = _free_port()
    argv, env = _entrypoint(tmp_path, port, STOMP_LOOPBACK_ONLY="1")
    with _broker(argv, env, tmp_path, port):
        assert _connect(port) == "CONNECTED"
        listeners = _listening_addresses(port)
        assert listeners and listeners <= LOOPBACK, listeners


def test_config_alone_refuses_anonymous_off_loopback(tmp_path: Path) -> None:
    """activemq.xml run without a credentials file on a non-loopback address (as on EC2 by
    hand): anonymous access is refused, and no default user gets in."""
    port = _free_port()
    config = StackConfig(state_dir=tmp_path, stomp_host="0.0.0.0", stomp_port=port)
    argv, env, cwd = activemq_command(config, tmp_path / "base", tmp_path / "data")
    argv = [a.replace("-Xmx256m", "-Xmx128m") for a in argv]
    with _broker(argv, env, cwd, port):
        assert _connect(port) == "ERROR", "anonymous CONNECT accepted on 0.0.0.0"
        assert _connect(port, "tzpush", "tzpush") == "ERROR", "a default user works"
        assert _connect(port, "tzpush", "") == "ERROR"
        # The passcode's default is an expression evaluated to a random UUID, not its own text.
        literal = "#{T(java.util.UUID).randomUUID().toString()}"
        assert literal in (REPO / "activemq" / "activemq.xml").read_text()
        assert _connect(port, "tzpush", literal) == "ERROR"
