"""``tzpush stats``: counts by status and category, reasons, lateness, tokens."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator

from shared.instants import parse_instant
from shared.settings import Settings
from shared.terminal import command


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the command and its options to ``sub``."""
    st = command(sub, "stats", "counts by status/category, reasons, lateness, tokens", cmd_stats)
    st.add_argument("--since", help="only messages due at or after this ISO instant")
    st.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    """Prints the figures (or ``--json``); returns 0."""
    from ops import stats
    from shared.store import db as dbm

    database = dbm.connect(settings.mongo)
    try:
        since = parse_instant(args.since, what="--since")
        # Every message is read (about 25 s a million here): say how far it got, on stderr.
        with _reading("reading messages") as advance:
            data = stats.compute(database, since, categories=settings.categories, progress=advance)
    finally:
        database.client.close()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        stats.render(data)
    return 0


@contextlib.contextmanager
def _reading(what: str) -> Iterator[Callable[[int], None]]:
    """A count of documents read so far, on stderr while it runs (a terminal only)."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn

    console = Console(stderr=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}: {task.completed:,.0f}"))
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as p:
        task = p.add_task(what, total=None)
        yield lambda n: p.advance(task, n)
