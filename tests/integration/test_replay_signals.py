"""Issue 14, replay: ``tzpush replay`` as a real process, stopped mid-run by SIGTERM (it settles
what it holds before exiting) or SIGKILL (it settles nothing; the next replay does once the
lease has run out). Either way nothing stays ``replaying`` and no message is pushed twice.

250 missed messages are three Expo requests (100, 100, 50), one at a time, each held 1.5 s by
the fake: the signal lands while the first request is in flight and the others have not left.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from shared.clock import utcnow
from shared.store import db as dbm
from shared.store import replays
from shared.store.mongo import replay_stores
from tests.integration.consumer_support import TZPUSH, consumer_env
from tests.integration.harness import wait_for
from tests.integration.ops_helpers import missed, run_cli

N = 250
UNKNOWN = "outcome unknown"


def _seed(world) -> list[str]:
    world.user("many", "Europe/Madrid")
    world.db[dbm.TOKENS].insert_many(
        [
            {
                "_id": f"sig-{i:03d}",
                "userId": "many",
                "deviceId": f"sig-dev-{i:03d}",
                "token": f"ExponentPushToken[sig-{i:03d}]",
                "isActive": True,
                "failureCount": 0,
            }
            for i in range(N - 1)
        ]
    )
    ids = missed(world, ["many"])
    assert len(ids) == N
    return ids


def _replay_process(world, log: Path) -> subprocess.Popen[bytes]:
    settings = world.settings.model_copy(
        update={"expo": world.settings.expo.model_copy(update={"concurrency": 1})}
    )
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(TZPUSH), "replay", "--yes", "--by", "sig"],
            env=consumer_env(settings),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _check_settled(world, ids: list[str]) -> None:
    pushed = Counter(p["data"]["messageId"] for p in world.fake.pushes())
    assert all(n == 1 for n in pushed.values())
    for i in ids:
        m = world.message(i)
        if i in pushed:  # it left: either its outcome was recorded, or nobody knows it
            assert m["status"] == "success" or (
                m["status"] == "failed" and UNKNOWN in m["reason"]
            ), m
        else:  # never left (or was fenced after its crash record: "unknown" at worst)
            assert m["status"] == "is_missed" or UNKNOWN in m.get("reason", ""), m


def _finish_and_check(world, ids: list[str]) -> None:
    before = {i: world.message(i)["status"] for i in ids}
    assert run_cli(world.settings, "replay", "--yes") == 0
    pushed = Counter(p["data"]["messageId"] for p in world.fake.pushes())
    assert all(n == 1 for n in pushed.values()), "a message pushed twice"
    for i in ids:
        if before[i] == "is_missed":
            assert world.message(i)["status"] == "success" and pushed[i] == 1


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_replay_process_stopped_mid_run_leaves_nothing_stuck_and_sends_nothing_twice(
    world, tmp_path, sig
):
    ids = _seed(world)
    world.fake.configure(latency_ms=1500)
    log = tmp_path / "replay.log"
    proc = _replay_process(world, log)
    try:
        wait_for(
            lambda: world.fake.stats()["requests"] >= 1 or proc.poll() is not None,
            60,
            what="the replay's first Expo request",
        )
        assert proc.poll() is None, log.read_text()
        os.kill(proc.pid, sig)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    world.fake.configure(latency_ms=0)
    statuses = Counter(world.statuses(ids).values())
    if sig == signal.SIGTERM:
        assert code == 128 + signal.SIGTERM, log.read_text()
        assert "replay stopped (SystemExit" in log.read_text()
        assert statuses["replaying"] == 0, statuses  # settled before it exited
    else:
        assert statuses["replaying"] > 0, statuses  # killed: nothing of its own ran
        # Once its lease has run out, whoever looks (the next replay, the janitor) settles it.
        later = utcnow() + replays.LEASE + dt.timedelta(minutes=1)
        settled = replays.settle_stale(replay_stores(world.db), later, "test")
        assert len(settled.missed) + len(settled.unknown) == statuses["replaying"]
    # The request in flight at the signal lands at the fake (a killed client does not stop it);
    # nothing after it left: the first fenced itself, the process was gone.
    wait_for(lambda: len(world.fake.pushes()) >= 100, 10, what="the request in flight to land")
    assert world.fake.stats()["requests"] == 1
    _check_settled(world, ids)
    assert Counter(world.statuses(ids).values())["is_missed"] >= 100, "later requests never left"
    _finish_and_check(world, ids)
