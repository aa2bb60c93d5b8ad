"""README "Calling tzpush from your backend": the curl, Python and TypeScript examples work
against a real ``tzpush api`` (the TypeScript one on Node, type annotations stripped, with the
``@tzpush/client`` built from ``clients/typescript``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.integration.test_api_support import REPO, prepare

SECTION = "## Calling tzpush from your backend"


def _blocks() -> dict[str, list[str]]:
    text = (REPO / "README.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    out: dict[str, list[str]] = {}
    for lang, code in re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S):
        out.setdefault(lang, []).append(code)
    return out


@pytest.fixture
def env(api, db):
    prepare(db)
    return {**os.environ, "TZPUSH_URL": api.url, "TZPUSH_KEY": api.app_key}


def _run(cmd: list[str], env: dict[str, str], stdin: str | None = None) -> str:
    proc = subprocess.run(cmd, input=stdin, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_curl_example(env, db):
    curl = [b for b in _blocks()["sh"] if "curl" in b]
    assert len(curl) == 1
    out = _run(["bash", "-euo", "pipefail", "-c", curl[0]], env)
    assert '"nextOccurrenceAt"' in out and '"items"' in out
    assert db["reminders"].find_one({"_id": "alice-citramon"})["offsetMinutes"] == 5


def test_the_python_example(env, db):
    [code] = _blocks()["python"]
    out = _run([sys.executable, "-"], env, stdin=code)
    assert out.splitlines()[-1].startswith("422 [{'name': 'timezone', 'in': 'body'")
    assert db["notification_tokens"].find_one({"deviceId": "tablet-7"})["userId"] == "bob"


@pytest.mark.skipif(shutil.which("node") is None, reason="no node here")
def test_the_typescript_example(env, db, tmp_path):
    [code] = _blocks()["typescript"]
    js = re.sub(r"([\w)])\??: (string|unknown|Response|Promise<\w+>)", r"\1", code)
    client = REPO / "clients" / "typescript"
    deps = subprocess.run(  # npm ci (once per lockfile), then tsc
        ["bash", str(client / "scripts" / "deps.sh")], capture_output=True, text=True, timeout=300
    )
    assert deps.returncode == 0, deps.stdout + deps.stderr
    # Inside the package, `import "@tzpush/client"` resolves to the package itself.
    script = client / f".readme-example-{tmp_path.name}.mjs"
    script.write_text(js)
    try:
        out = _run(["node", str(script)], env)
    finally:
        script.unlink()
    assert out.startswith("carol-mood ")
    assert out.splitlines()[-1] == "422 /problems/invalid-input unknown time zone 'Europe/Berln'"
    assert db["users"].find_one({"_id": "carol"})["timezone"] == "America/New_York"
