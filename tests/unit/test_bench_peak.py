"""The scale bench's peak RSS is the creator's own, not the bench's (bench/peak.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.scenarios_scale import measured

MIB = 1024  # ru_maxrss is in KiB


def test_a_childs_peak_rss_is_its_own_not_that_of_the_process_that_started_it(
    tmp_path: Path,
) -> None:
    ballast = bytearray(400 * 2**20)
    for i in range(0, len(ballast), 4096):  # resident, as the bench's seeded population is
        ballast[i] = 1
    # What the bench read before: a child started straight from it reports at least the
    # bench's own peak (Linux keeps the old memory's high-water mark across exec).
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    _, _, usage = os.wait4(child.pid, 0)
    assert usage.ru_maxrss > 400 * MIB
    # Through the launcher: the child's own peak (an interpreter doing nothing: tens of MB).
    out = tmp_path / "peak.json"
    subprocess.run(measured([sys.executable, "-c", "pass"], out), check=True)
    peak = json.loads(out.read_text())
    assert peak["exit"] == 0
    assert 0 < peak["maxrss_kib"] < 100 * MIB
    del ballast


def test_the_launcher_passes_on_the_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "peak.json"
    proc = subprocess.run(measured([sys.executable, "-c", "raise SystemExit(3)"], out))
    assert proc.returncode == 3
    assert json.loads(out.read_text())["exit"] == 3
