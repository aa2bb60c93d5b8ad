"""``tzpush messages show|list``: one message with its guard and token; a user's messages."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
from typing import Any

from shared.domain.messages import Status
from shared.errors import InputError, NotFoundError
from shared.instants import as_time, parse_instant
from shared.settings import Settings
from shared.terminal import command, subcommands

MAX_LISTED = 1000  # messages list: at most this many a call


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the command and its options to ``sub``."""
    ms = subcommands(sub, "messages", "inspect messages")
    command(
        ms, "show", "one message with its send guard and token", cmd_messages_show, "message_id"
    )
    ml = command(
        ms,
        "list",
        "a user's messages by due instant (sent and upcoming), with their ids",
        cmd_messages_list,
        "user_id",
    )
    ml.add_argument("--status", choices=[s.value for s in Status], help="only this status")
    ml.add_argument("--since", help="due at or after this ISO instant")
    ml.add_argument("--until", help="due before this ISO instant")
    ml.add_argument(
        "--limit", type=int, default=50, help=f"at most this many (1 to {MAX_LISTED}; 50)"
    )
    ml.add_argument(
        "--after", help="go on after this message (DUE/ID, as the 'more:' line gives it)"
    )
    ml.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_messages_show(args: argparse.Namespace, settings: Settings) -> int:
    """Prints one message with its send guard and token as JSON; NotFoundError if there is none."""
    from shared.store import db as dbm
    from shared.store.mongo.reads import message_state

    database = dbm.connect(settings.mongo)
    try:
        with dbm.translate_errors("reading the message"):
            state = message_state(database, args.message_id)
    finally:
        database.client.close()
    if state is None:
        raise NotFoundError(f"no message {args.message_id!r}")
    token = state.token
    out = {
        "message": state.message,
        "sendGuard": state.guard,
        "token": token and {k: token.get(k) for k in ("_id", "isActive", "deactivationReason")},
    }
    print(json.dumps(out, indent=2, default=str))
    return 0


MESSAGE_COLUMNS: dict[str, Any] = {
    "due (UTC)": lambda d: _utc(d.get("scheduledAt")),
    "category": "category",
    "status": "status",
    "reason": "reason",
    "sent": lambda d: _utc(d.get("sentAt")),
    "id": "_id",
}


def _utc(t: Any) -> str:
    at = as_time(t)
    return "" if at is None else at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cmd_messages_list(args: argparse.Namespace, settings: Settings) -> int:
    """The user's messages due in ``[--since, --until)``, oldest first (the HTTP API's read:
    ``shared.store.mongo.history.messages_page``), and the command that shows the next ones."""
    from shared.domain.validation import validate_id
    from shared.store import db as dbm
    from shared.store.mongo.history import messages_page
    from shared.terminal import print_rows

    user_id = validate_id(args.user_id, "user id")
    since = parse_instant(args.since, what="since")
    until = parse_instant(args.until, what="until")
    after = _after(args.after)
    if not 1 <= args.limit <= MAX_LISTED:
        raise InputError(f"--limit {args.limit}: give 1 to {MAX_LISTED}")
    database = dbm.connect(settings.mongo)
    try:
        with dbm.translate_errors("reading the user's messages"):
            docs, more = messages_page(
                database,
                user_id,
                limit=args.limit,
                start=since,
                end=until,
                status=args.status,
                after=after,
            )
    finally:
        database.client.close()
    title = f"messages of {user_id}" + (f" ({args.status})" if args.status else "")
    print_rows(docs, MESSAGE_COLUMNS, title=title, as_json=args.json)
    if more:
        print(
            f"more: {_next_command(args, user_id, docs[-1])}",
            file=sys.stderr if args.json else sys.stdout,
        )
    elif not docs and not args.json:
        print("none")
    return 0


def _after(raw: str | None) -> tuple[dt.datetime, str] | None:
    """``--after DUE/ID``: the last message shown (its due instant and id)."""
    if raw is None:
        return None
    due, sep, message_id = raw.partition("/")
    at = parse_instant(due, what="--after's due instant") if sep and message_id else None
    if at is None:
        raise InputError(f"--after {raw!r}: give DUE/ID, as the 'more:' line prints it")
    return at, message_id


def _next_command(args: argparse.Namespace, user_id: str, last: dict[str, Any]) -> str:
    """The command that lists what follows ``last``, with this one's options, shell-quoted."""
    due = as_time(last["scheduledAt"])  # the page's range read only datetimes
    assert due is not None
    at = due.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    words = ["tzpush", "messages", "list"]
    for flag, value in (
        ("--status", args.status),
        ("--since", args.since),
        ("--until", args.until),
    ):
        if value is not None:
            words += [flag, value]
    words += ["--limit", str(args.limit), "--after", f"{at}/{last['_id']}"]
    if args.json:
        words.append("--json")
    return " ".join(shlex.quote(w) for w in [*words, "--", user_id])
