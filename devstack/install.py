"""Installing the local stack: Debian's activemq package (and a JRE) and SecantusDB's own venv.

Separate from starting and stopping because it is a different kind of work: slow, run once per
machine, needs root for apt and the network for pip, and idempotent (each step is skipped when
what it makes is already there). `tzpush services install`/`up`, the test fixtures and the bench
call `ensure_installed`; starting a server only needs `secantus_binary` to find it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devstack.config import ACTIVEMQ_JAR, ServiceError, StackConfig

SECANTUS_REQUIREMENT = "secantusdb>=0.7.0b3"


def _run(cmd: Sequence[str], **kwargs: Any) -> None:
    print("+ " + " ".join(cmd), flush=True)
    result = subprocess.run(list(cmd), check=False, **kwargs)
    if result.returncode != 0:
        raise ServiceError(f"command failed with exit code {result.returncode}: {' '.join(cmd)}")


def missing_packages() -> list[str]:
    """The Debian packages the local broker still needs: none once its jar and a java exist.

    Only what the broker runs on is checked. libactivemq-java's Recommends `libxstream-java` and
    `libjettison-java` are not installed (`--no-install-recommends`) and not asked for: tzpush's
    scheduled sends, acks, NACK to `ActiveMQ.DLQ` and scheduler REMOVEALL work without them
    (measured; only advisory-typed frames such as scheduler BROWSE replies need XStream, and
    tzpush uses none). Asking for them made every `services install`/`up` run apt again.
    """
    packages = []
    if not ACTIVEMQ_JAR.exists():
        packages.append("activemq")
    if shutil.which("java") is None:
        packages.append("default-jre-headless")
    return packages


def ensure_system_packages() -> None:
    """apt-get install activemq (and a JRE) only when they are missing. Idempotent and silent."""
    packages = missing_packages()
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
