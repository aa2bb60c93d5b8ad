"""``tzpush rebuild``: re-arm every pending message from the database."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable

from ops.commands.common import progress_bar
from shared.settings import Settings
from shared.terminal import command

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
FAR = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the command and its options to ``sub``."""
    command(sub, "rebuild", "re-arm every pending message from the database", cmd_rebuild)


def cmd_rebuild(args: argparse.Namespace, settings: Settings) -> int:
    """Re-arms every pending message from the database and says what was left to a live consumer."""
    from creator.rearm import STOPPED_MARGIN_S, count_pending
    from creator.service import open_planner

    with open_planner(settings) as planner:
        total = count_pending(planner, EPOCH, FAR)
        with progress_bar(total) as bar:
            task = bar.add_task("re-arming", total=total)
            advance: Callable[[int], None] = lambda n: bar.advance(task, n)  # noqa: E731
            # The broker lost its store: no frame of a consumer that died will be redelivered,
            # so the rebuilt wake-ups take over the guards such a consumer left.
            done = planner.rearm(EPOCH, FAR, progress=advance, take_over_stopped=True)
    print(
        f"re-armed {done.messages} pending message(s) from the database in {done.wakeups} "
        "wake-up(s) (duplicates of wake-ups still on the broker are skipped by the send guards)"
    )
    if done.taken_over:
        print(
            f"{done.taken_over} of them held by a consumer that stopped: their wake-ups take "
            "its guards over (what may have left ends failed, outcome unknown; the rest is sent)"
        )
    if done.held:
        w = settings.wakeup
        after = int(w.lead_seconds + w.window_seconds + STOPPED_MARGIN_S)
        print(
            f"{done.held} of them held by a consumer that may still be running: left to it "
            f"(if it stopped, run rebuild again once its guards are {after} s old)"
        )
    return 0
