"""devstack/install.py: the apt step runs only when something the broker runs on is missing.

`apt-get install --no-install-recommends activemq` never brings xstream.jar or jettison.jar (they
are Recommends of libactivemq-java), and the broker does not need them for what tzpush does
(scheduled sends, acks, NACK to the DLQ, REMOVEALL). A check that asked for them made every
`tzpush services install` / `up`, `make run` and `make test` run apt again.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from devstack import install


@pytest.fixture
def apt_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every command `ensure_system_packages` would run, recorded instead of run."""
    calls: list[list[str]] = []

    def record(cmd: Sequence[str], **kwargs: Any) -> None:
        calls.append(list(cmd))

    monkeypatch.setattr(install, "_run", record)
    monkeypatch.setattr(install.os, "geteuid", lambda: 0)
    return calls


def _machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, jar: bool, java: bool) -> None:
    """A machine where activemq was installed the way install.py installs it: no Recommends."""
    activemq_jar = tmp_path / "activemq.jar"
    if jar:
        activemq_jar.touch()
    monkeypatch.setattr(install, "ACTIVEMQ_JAR", activemq_jar)
    # xstream.jar / jettison.jar absent, as after `apt-get install --no-install-recommends`.
    absent = (tmp_path / "java" / "xstream.jar", tmp_path / "java" / "jettison.jar")
    monkeypatch.setattr(install, "MISSING_JARS", absent, raising=False)
    real_which = shutil.which
    monkeypatch.setattr(
        install.shutil,
        "which",
        lambda name, *a, **kw: (
            ("/usr/bin/java" if java else None) if name == "java" else real_which(name, *a, **kw)
        ),
    )


def test_installed_broker_runs_no_apt(
    apt_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine(monkeypatch, tmp_path, jar=True, java=True)
    install.ensure_system_packages()
    assert apt_calls == [], "activemq and java are installed, yet apt would run"


def test_missing_broker_installs_activemq_once(
    apt_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine(monkeypatch, tmp_path, jar=False, java=True)
    install.ensure_system_packages()
    assert [c[:2] for c in apt_calls] == [["apt-get", "update"], ["apt-get", "install"]]
    assert apt_calls[1][-1] == "activemq"


def test_missing_java_installs_a_jre(
    apt_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine(monkeypatch, tmp_path, jar=True, java=False)
    install.ensure_system_packages()
    assert apt_calls[-1][-1:] == ["default-jre-headless"]


@pytest.mark.skipif(
    not Path("/usr/share/activemq/bin/activemq.jar").exists() or shutil.which("java") is None,
    reason="Debian's activemq is not installed on this machine",
)
def test_this_machine_needs_no_apt(apt_calls: list[list[str]]) -> None:
    """The real filesystem: activemq installed by `tzpush services install` is enough."""
    install.ensure_system_packages()
    assert apt_calls == [], f"apt would run again here: {apt_calls}"
    assert os.path.exists(install.ACTIVEMQ_JAR)
