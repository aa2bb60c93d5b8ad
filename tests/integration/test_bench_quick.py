"""Keep the bench working: run it at tiny sizes on its own ports (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import TEST_MONGO_PORT, TEST_STOMP_PORT
from tests.integration.test_api_support import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_bench_tiny(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TZPUSH_BENCH_STATE_DIR": str(REPO / ".local" / "bench-ci"),
        # Beside this worker's test stack (ports of its own per worker and per checkout), so two
        # suites on one machine never take each other's bench ports.
        "TZPUSH_BENCH_STOMP_PORT": str(TEST_STOMP_PORT + 5),
        "TZPUSH_BENCH_MONGO_PORT": str(TEST_MONGO_PORT + 5),
        "TZPUSH_BENCH_FAKE_PORT": str(free_port()),
    }
    argv = [sys.executable, "-m", "bench", "--sizes", "tiny", "--out", str(tmp_path)]
    argv += ["--only", "plan,idle,herd,outage,drills,api"]
    argv += ["--drills", "broker_kill9,skipped_pass"]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=230)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(next(tmp_path.glob("*.json")).read_text())
    sc = results["scenarios"]
    assert not [k for k, v in sc.items() if "error" in v], sc
    assert not [k for k, v in sc["drills"].items() if "error" in v], sc["drills"]
    plan = sc["plan"]
    assert plan["inserted"] == plan["planned"] == plan["reminders"]
    assert plan["wakeups"] > 0 and plan["floor_seconds"] > 0
    for name in ("herd", "outage"):
        r = sc[name]
        assert (r["sent"], r["lost"], r["duplicates"]) == (r["n"], 0, 0), r
        assert r["terminal"], r
    assert sc["drills"]["broker_kill9"]["lost"] == 0
    assert "opcounters" in sc["idle"]
    api = sc["api"]  # figures only: no bar is asserted at tiny size
    assert api["onboarding"]["failed_items"] == 0 and api["floor"]["documents"]["users"] == 50
    assert api["login"]["errors"] == 0 and api["login"]["logins"] > 0
    assert list(tmp_path.glob("*.png"))
