"""The wheel is the unit we ship: build it, install it alone into a fresh venv, run `tzpush`.

Lives outside tests/integration (whose conftest marks everything `integration`) so it runs in the
normal suite: it needs no local stack, only PyPI (or pip's cache) for the build backend and the
runtime dependencies. ~50 s with a warm pip cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "creator", "consumer", "ops", "devstack", "api")

pytestmark = pytest.mark.timeout(600)


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # No TZPUSH_* from the developer's shell, no .env from the repo: the wheel must stand alone.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TZPUSH_", "PYTHON"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stdout}{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build from a copy of the work tree, so the build never writes into the repository."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in PACKAGES:
        shutil.copytree(REPO / pkg, src / pkg, ignore=ignore)
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(src)], cwd=tmp)
    wheels = list(dist.glob("tzpush-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = zf.read(entry_points).decode()
    for pkg in PACKAGES:
        assert f"{pkg}/__init__.py" in names
    assert "shared/settings/__init__.py" in names and "ops/cli.py" in names
    assert "shared/domain/messages.py" in names and "devstack/fake_expo.py" in names
    assert "api/cli.py" in names and "api/app.py" in names
    # The console's templates and static files are package data: without them /console fails.
    assert "api/console/templates/base.html" in names and "api/console/templates/user.html" in names
    assert "api/console/static/console.js" in names and "api/console/static/console.css" in names
    assert not any(n.startswith("tests/") for n in names)
    assert "tzpush = ops.cli:main" in scripts


def test_tzpush_help_from_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], cwd=tmp_path)

    where = _run([str(py), "-c", "import shared; print(shared.__file__)"], cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(env_dir), where.stdout

    proc = _run([str(env_dir / "bin" / "tzpush"), "--help"], cwd=tmp_path, timeout=60)
    assert proc.stdout.startswith("usage: tzpush"), proc.stdout
