"""``tzpush doctor``: check settings, database, broker scheduling and Expo."""

from __future__ import annotations

import argparse

from shared.settings import Settings
from shared.terminal import command


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the command and its options to ``sub``."""
    dr = command(sub, "doctor", "check settings, database, broker scheduling, Expo", cmd_doctor)
    dr.add_argument("--fix-indexes", action="store_true", help="create missing indexes")


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    """Prints every check; returns 1 if one failed, else 0."""
    from ops import doctor

    checks = doctor.run_checks(settings, fix_indexes=args.fix_indexes)
    doctor.render(checks)
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        print(f"{len(failed)} check(s) failed: " + ", ".join(c.name for c in failed))
        return 1
    print("all checks passed")
    return 0
