"""Run a command and write its own peak RSS: ``python bench/peak.py OUT.json -- argv...``.

Why a separate small process: Linux reports, as a child's ``ru_maxrss``, at least the peak RSS
of the process it was forked from (``exec`` keeps the old memory's high-water mark in the
child's accounting). Started straight from the bench, which holds the whole seeded population,
a creator's peak read 1,635 MB at 1M reminders although the creator itself stayed far below it.
This launcher is a fresh interpreter of a few MB, so its child's ``ru_maxrss`` is the child's own.

Standard library only (it runs with ``-I``). SIGTERM and SIGINT are passed on to the child. The
file gets ``{"exit": code, "maxrss_kib": peak}``; the launcher exits with the child's code.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: peak.py OUT.json -- command [args...]", file=sys.stderr)
        return 2
    out, cmd = argv[0], argv[2:]
    child = subprocess.Popen(cmd)

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    _, status, usage = os.wait4(child.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    child.returncode = code
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"exit": code, "maxrss_kib": usage.ru_maxrss}, f)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
