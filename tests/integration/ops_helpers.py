"""Helpers shared by the operator-command tests: run a CLI command with given settings."""

from __future__ import annotations

import datetime as dt
import socket
from typing import Any

from creator.janitor import sweep
from ops.cli import build_parser
from shared.clock import utcnow
from shared.settings import Settings
from shared.store.mongo import creator_stores


def run_cli(settings: Settings, *argv: str) -> int:
    """Parse ``argv`` as ``tzpush`` would and run the handler with these settings."""
    args = build_parser().parse_args(list(argv))
    return int(args.func(args, settings) or 0)


def missed(
    world: Any,
    uids: list[str],
    *,
    hours_ago: float = 1.0,
    due: dt.datetime | None = None,
    **kw: Any,
) -> list[str]:
    """Messages due ``hours_ago`` (or at ``due``) that the janitor ends as is_missed, as in life."""
    if due is None:
        due = (utcnow() - dt.timedelta(hours=hours_ago)).replace(microsecond=0)
    kw.setdefault("category", "safety")
    docs = world.due_messages(uids, due, arm=False, **kw)
    sweep(creator_stores(world.db).pending, world.settings, utcnow())
    ids = [d["_id"] for d in docs]
    assert set(world.statuses(ids).values()) == {"is_missed"}
    return ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
