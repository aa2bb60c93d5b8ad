"""Issue 15, "stop on time": every service exits within ``shutdown_timeout_s`` + 2 s after
SIGTERM, whatever is down. Here both the database and the broker are gone (killed) when the
signal comes; the consumer holds prepared wake-ups whose guards it would like to release (what
it cannot release is left for a takeover, which is safe).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.consumer_support import (
    TZPUSH,
    arm,
    consumer_env,
    guarded,
    herd,
    ids_of,
    in_seconds,
    set_creator,
    set_wakeup,
)
from tests.integration.harness import World, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
READY = {"consumer": " consuming ", "creator": "creator running"}


def _start(world: World, role: str, log: Path) -> subprocess.Popen[bytes]:
    env = consumer_env(world.settings, TZPUSH_LOG_LEVEL="DEBUG")
    env["TZPUSH_CREATOR__INTERVAL_SECONDS"] = "5"
    env["TZPUSH_CONSUMER__RECEIPTS_INTERVAL_S"] = "1"
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(TZPUSH), role],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.parametrize("role", ["consumer", "creator", "receipts"])
def test_sigterm_with_database_and_broker_gone_exits_within_the_deadline(
    world, stack, tmp_path, role
):
    set_creator(world, wakeup_size=10)
    set_wakeup(world, lead_seconds=25.0)
    log = tmp_path / f"{role}.log"
    proc = _start(world, role, log)
    try:
        if role in READY:
            wait_for(
                lambda: proc.poll() is None and READY[role] in log.read_text(errors="replace"),
                40,
                what=f"the {role} to start",
            )
        else:  # the receipts poller says nothing at start: give it time to be in its loop
            time.sleep(3)
            assert proc.poll() is None, log.read_text(errors="replace")
        if role == "consumer":  # twenty prepared wake-ups, held until an instant far ahead
            docs = herd(world, 200, in_seconds(28), prefix="st")
            arm(world, docs)
            wait_for(lambda: guarded(world, ids_of(docs)), 20, what="the consumer to hold them")
        stack.kill9("mongo")
        stack.kill9("activemq")
        started = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(60)
        took = time.monotonic() - started
        deadline = world.settings.shutdown.timeout_s + 2
        tail = log.read_text(errors="replace")[-1500:]
        assert proc.poll() is not None, f"{role} still running 60 s after SIGTERM:\n{tail}"
        assert took <= deadline, f"{role} took {took:.1f} s, deadline {deadline} s:\n{tail}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        stack.start("activemq")
        stack.start("mongo")
