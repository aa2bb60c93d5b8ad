"""Found by chaos seed 16 (docs/notes/races.md): a consumer whose clock runs ahead sends
before the due instant. Open: the rule lives in consumer/ (the hold until due goes by the
process's own clock), which is being restructured; this test fails until it is fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.consumer_support import (
    ConsumerProcess,
    arm,
    herd,
    in_seconds,
    ms,
    terminal,
)
from tests.integration.harness import wait_for

FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
AHEAD_S = 4


@pytest.mark.skipif(not FAKETIME_LIB.exists(), reason="needs Debian's faketime (make install)")
def test_a_consumer_whose_clock_runs_4_s_ahead_sends_nothing_before_its_due_instant(
    world, tmp_path: Path
) -> None:
    ahead = dict(
        LD_PRELOAD=str(FAKETIME_LIB), FAKETIME=f"+{AHEAD_S}s", FAKETIME_DONT_FAKE_MONOTONIC="1"
    )
    proc = ConsumerProcess(world.settings, tmp_path / "consumer.log", **ahead)
    try:
        proc.wait_consuming()
        due = in_seconds(12)
        docs = herd(world, 10, due)
        arm(world, docs)
        wait_for(lambda: terminal(world, 10), 60, what="every message terminal")
    finally:
        proc.close()
    early = [p for p in world.fake.pushes() if p["received_at_ms"] < ms(due)]
    assert early == [], f"{len(early)} pushes before the due instant, up to {AHEAD_S} s early"
