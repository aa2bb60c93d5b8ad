"""activemq/docker-entrypoint.sh, run with `sh` and a stub `java` that prints its arguments.

The broker image must not be open to whoever reaches its port: no anonymous access and no
default password. Without TZPUSH_STOMP__LOGIN and TZPUSH_STOMP__PASSCODE it refuses to start (one
line naming them), unless STOMP_LOOPBACK_ONLY=1 says it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "activemq" / "docker-entrypoint.sh"
SH = shutil.which("sh")

pytestmark = pytest.mark.skipif(SH is None, reason="no sh")

STUB_JAVA = """#!/bin/sh
# Stub: print each argument on its own line, and never start anything.
for arg in "$@"; do printf 'ARG %s\\n' "$arg"; done
"""


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    data: Path

    @property
    def argv(self) -> list[str]:
        return [ln[4:] for ln in self.stdout.splitlines() if ln.startswith("ARG ")]

    @property
    def started(self) -> bool:
        return bool(self.argv)

    def prop(self, name: str) -> str | None:
        prefix = f"-D{name}="
        return next((a[len(prefix) :] for a in self.argv if a.startswith(prefix)), None)

    @property
    def credentials(self) -> Path:
        return self.data / "credentials.properties"


def _run(tmp_path: Path, **env: str) -> Run:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    java = bindir / "java"
    java.write_text(STUB_JAVA)
    java.chmod(0o755)
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    base_env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "ACTIVEMQ_CONF": str(REPO / "activemq"),
        "ACTIVEMQ_BASE": str(tmp_path / "base"),
        "ACTIVEMQ_DATA": str(data),
    }
    proc = subprocess.run(
        [str(SH), str(ENTRYPOINT)],
        env={**base_env, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr, data)


CREDS = {"TZPUSH_STOMP__LOGIN": "amq-user", "TZPUSH_STOMP__PASSCODE": "s3cret-Passcode"}


def test_refuses_to_start_without_credentials(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert run.returncode != 0, f"started without credentials: {run.argv}"
    assert not run.started
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "TZPUSH_STOMP__LOGIN" in lines[0] and "TZPUSH_STOMP__PASSCODE" in lines[0]
    assert "STOMP_LOOPBACK_ONLY" in lines[0]


@pytest.mark.parametrize("missing", ["TZPUSH_STOMP__LOGIN", "TZPUSH_STOMP__PASSCODE"])
def test_refuses_half_the_credentials(tmp_path: Path, missing: str) -> None:
    env = {k: v for k, v in CREDS.items() if k != missing}
    run = _run(tmp_path, **env)
    assert run.returncode != 0 and not run.started, run.argv
    assert len(run.stderr.strip().splitlines()) == 1 and missing in run.stderr


def test_starts_with_credentials_on_all_interfaces_without_anonymous(tmp_path: Path) -> None:
    run = _run(tmp_path, **CREDS)
    assert run.returncode == 0, run.stderr
    assert run.prop("tzpush.stomp.host") == "0.0.0.0"
    assert run.prop("tzpush.stomp.port") == "61613"
    assert run.argv[-1].endswith("/activemq.xml")
    # The passcode goes to a 0600 file, never on the command line.
    assert not any(CREDS["TZPUSH_STOMP__PASSCODE"] in a for a in run.argv)
    mode = stat.S_IMODE(run.credentials.stat().st_mode)
    assert mode == 0o600, oct(mode)
    props = dict(ln.split("=", 1) for ln in run.credentials.read_text().splitlines() if "=" in ln)
    assert props == {
        "tzpush.auth.anonymous": "false",
        "tzpush.stomp.login": "amq-user",
        "tzpush.stomp.passcode": "s3cret-Passcode",
    }


def test_loopback_only_binds_127_0_0_1_and_may_be_anonymous(tmp_path: Path) -> None:
    stale = tmp_path / "data"
    stale.mkdir()
    (stale / "credentials.properties").write_text("tzpush.auth.anonymous=false\n")
    run = _run(tmp_path, STOMP_LOOPBACK_ONLY="1")
    assert run.returncode == 0, run.stderr
    assert run.prop("tzpush.stomp.host") == "127.0.0.1"
    assert not run.credentials.exists(), "a stale credentials file from an earlier run stays"


def test_loopback_only_with_credentials_keeps_them(tmp_path: Path) -> None:
    run = _run(tmp_path, STOMP_LOOPBACK_ONLY="true", **CREDS)
    assert run.returncode == 0, run.stderr
    assert run.prop("tzpush.stomp.host") == "127.0.0.1"
    assert "tzpush.auth.anonymous=false" in run.credentials.read_text()


def test_a_bad_loopback_switch_is_refused(tmp_path: Path) -> None:
    run = _run(tmp_path, STOMP_LOOPBACK_ONLY="maybe")
    assert run.returncode != 0 and not run.started
    assert "STOMP_LOOPBACK_ONLY" in run.stderr and len(run.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "passcode",
    ["two\nlines", "has ${placeholder}", "has #{T(java.lang.Runtime)}", "caf\u00e9"],
    ids=["newline", "spring-placeholder", "spring-expression", "non-ascii"],
)
def test_refuses_a_passcode_the_properties_file_cannot_carry(tmp_path: Path, passcode: str) -> None:
    run = _run(tmp_path, TZPUSH_STOMP__LOGIN="amq-user", TZPUSH_STOMP__PASSCODE=passcode)
    assert run.returncode != 0 and not run.started, run.argv
    assert "TZPUSH_STOMP__PASSCODE" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert passcode not in run.stderr, "the refusal must not print the secret"


def test_backslashes_and_leading_spaces_survive_the_properties_file(tmp_path: Path) -> None:
    run = _run(tmp_path, TZPUSH_STOMP__LOGIN="amq-user", TZPUSH_STOMP__PASSCODE=" a\\b:c=d!")
    assert run.returncode == 0, run.stderr
    assert r"tzpush.stomp.passcode=\ a\\b:c=d!" in run.credentials.read_text().splitlines()


def test_entrypoint_is_posix_sh() -> None:
    """`sh -n` parses it (dash on Debian, the image's /bin/sh)."""
    proc = subprocess.run([str(SH), "-n", str(ENTRYPOINT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.access(ENTRYPOINT, os.R_OK)
