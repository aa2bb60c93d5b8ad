"""``python -m chaoscheck RUN_DIR``: the verdicts of a recorded chaos run; exit 1 on any
violation."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chaoscheck.run import check_dir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaoscheck", description=__doc__)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--no-picture", action="store_true")
    args = ap.parse_args(argv)
    report = check_dir(args.run_dir, picture=not args.no_picture)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
