"""The TypeScript client (``clients/typescript``, ``@tzpush/client``): its ``node --test`` suite
against a real ``tzpush api`` on the test stack, from pytest, so ``make test`` keeps one runner
and one stack.

Two API processes serve it: the module's own (``api``) and one allowing a single request
every 4 s per key, where the client's retry of a 429 is seen. ``npm ci`` installs the committed
lockfile (once per version of it) and ``tsc`` builds the client and its tests; node's output is
printed, and any node test that fails fails this test. Where Node is not installed the test
is skipped with one line saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.integration.test_api_support import (
    REPO,
    ApiServer,
    plan_window,
    prepare,
    start_api,
)

CLIENT = REPO / "clients" / "typescript"
NODE_TIMEOUT_S = 300
NO_NODE = "Node.js (node and npm) is not installed: the TypeScript client's tests are skipped"


@pytest.fixture(scope="module")
def throttled(stack) -> Iterator[ApiServer]:
    # One request every 4 s per key: a request sent right after another is refused even on a
    # machine slow enough to take a second or more between the two.
    limits = {"TZPUSH_API__RATE_PER_SECOND": "0.25", "TZPUSH_API__BURST": "1"}
    with start_api(stack.settings, env=limits) as server:
        yield server


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=CLIENT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason=NO_NODE)
def test_the_typescript_client_passes_its_node_tests_against_a_live_api(api, throttled, db):
    prepare(db)
    plan_window(api, db)  # the next 24 h planned: each change re-plans its user at once
    built = _run(["bash", "scripts/deps.sh"], dict(os.environ), NODE_TIMEOUT_S)
    assert built.returncode == 0, f"npm ci / tsc failed:\n{built.stdout}\n{built.stderr}"
    tests = sorted(str(p.relative_to(CLIENT)) for p in (CLIENT / "dist" / "test").glob("*.test.js"))
    assert tests, "no compiled node tests in clients/typescript/dist/test"
    env = {
        **os.environ,
        "TZPUSH_URL": api.url,
        "TZPUSH_KEY": api.app_key,
        "TZPUSH_OPS_KEY": api.ops_key,
        "TZPUSH_THROTTLED_URL": throttled.url,
        "TZPUSH_THROTTLED_KEY": throttled.app_key,
    }
    node = _run(["node", "--test", "--test-reporter=spec", *tests], env, NODE_TIMEOUT_S)
    print(node.stdout, node.stderr, sep="\n")
    assert node.returncode == 0, f"node --test failed:\n{node.stdout}\n{node.stderr}"
    assert "# fail 0" in node.stdout or "ℹ fail 0" in node.stdout, node.stdout
