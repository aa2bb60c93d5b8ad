"""Operator commands: ``tzpush stats|replay|rebuild|doctor|messages show|list|demo``.

Thin wiring: parse options, open connections from settings, call the module that does the work
(``ops.stats``, ``ops.replay``, ``ops.doctor``, ``ops.demo``) and print. Heavy imports
happen inside the handlers so ``tzpush --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import getpass
import json
import shlex
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from shared.domain.messages import Status
from shared.errors import InputError, NotFoundError
from shared.instants import parse_instant
from shared.settings import Settings
from shared.terminal import command, subcommands

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
FAR = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)
PROGRESS_ABOVE = 200  # show a progress bar for selections larger than this
MAX_LISTED = 1000  # messages list: at most this many a call


def _csv(raw: str | None) -> list[str]:
    return [x.strip() for x in (raw or "").split(",") if x.strip()]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    st = command(sub, "stats", "counts by status/category, reasons, lateness, tokens", cmd_stats)
    st.add_argument("--since", help="only messages due at or after this ISO instant")
    st.add_argument("--json", action="store_true", help="machine-readable output")

    rp = command(
        sub, "replay", "send is_missed (or failed) messages again (each at most once)", cmd_replay
    )
    rp.add_argument(
        "--status",
        choices=("is_missed", "failed"),
        default="is_missed",
        help="what to replay: is_missed (default), or failed for a project-level cause",
    )
    rp.add_argument(
        "--cause",
        help="with --status failed: comma-separated causes, credentials (InvalidCredentials, "
        "MismatchSenderId, UNAUTHORIZED) and/or expo-down (5xx, network, 429 past the "
        "retries); default both",
    )
    rp.add_argument("--since", help="due at or after this ISO instant")
    rp.add_argument("--until", help="due before this ISO instant")
    rp.add_argument("--category", help="comma-separated categories")
    rp.add_argument("--user", help="comma-separated user ids")
    rp.add_argument("--ids", help="comma-separated message ids")
    rp.add_argument("--dry-run", action="store_true", help="list what would be replayed")
    rp.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    rp.add_argument("--by", default=None, help="who replays (default: the OS user)")
    rp.add_argument("--reason", default="manual replay", help="recorded on each message")

    command(sub, "rebuild", "re-arm every pending message from the database", cmd_rebuild)

    dr = command(sub, "doctor", "check settings, database, broker scheduling, Expo", cmd_doctor)
    dr.add_argument("--fix-indexes", action="store_true", help="create missing indexes")

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

    _register_demo(sub)


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
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


def _progress(total: int, what: str) -> Any:
    from rich.progress import Progress

    return Progress(disable=total <= PROGRESS_ABOVE or not sys.stdout.isatty(), transient=False)


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from ops.replay import Replayer, Selection, resume, select, sigterm_raises
    from shared import metrics
    from shared.expo.sender import ExpoSender
    from shared.store import db as dbm
    from shared.store import replays
    from shared.store.fleet import FleetShare

    sel = Selection(
        since=parse_instant(args.since, what="--since"),
        until=parse_instant(args.until, what="--until"),
        categories=_csv(args.category),
        users=_csv(args.user),
        ids=_csv(args.ids),
        status=Status(args.status),
        causes=_csv(args.cause),
    )
    status = sel.status.value
    by = args.by or getpass.getuser()
    database = dbm.connect(settings.mongo)
    try:
        if args.dry_run:
            stale = replays.stale_holders(database, dt.datetime.now(dt.UTC))
            if stale:
                print(
                    f"note: {len(stale)} replay(s) stopped while holding messages (replaying); "
                    "a replay without --dry-run, or the janitor, settles them"
                )
        else:
            # A replay that stopped without settling (killed hard) held these past its lease:
            # what it never sent is is_missed again, so this replay can select it.
            settled = resume(database, by)
            if settled:
                print(f"settled an earlier replay that stopped: {settled.describe()}")
        docs = select(database, sel)
        if not docs:
            print(f"nothing to replay: no {status} message matches")
            return 0
        if args.dry_run or len(docs) <= 50:
            # Plain lines, not a table: ids must stay whole for copy and paste into --ids.
            print(f"{len(docs)} {status} message(s) to replay (id, user, category, due, why):")
            for d in docs[:1000]:
                due = f"{d['scheduledAt']:%Y-%m-%dT%H:%M:%S}Z"
                print(f"  {d['_id']}  {d['userId']}  {d['category']}  {due}  {d.get('reason')}")
            if len(docs) > 1000:
                print(f"  ... and {len(docs) - 1000} more")
        if args.dry_run:
            print(f"dry run: {len(docs)} message(s) would be replayed; nothing changed")
            return 0
        if not args.yes:
            if not sys.stdin.isatty():
                raise InputError("not a terminal: pass --yes to replay without confirmation")
            answer = input(f"replay {len(docs)} message(s) now? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("nothing replayed")
                return 1
        # A replay is one more sender: it takes its share of Expo's rate with the consumers.
        fleet = FleetShare(
            database, f"replay-{uuid.uuid4().hex[:8]}", settings.expo.rate_per_second, kind="replay"
        ).start()
        sender = ExpoSender(settings.expo, on_event=metrics.expo_event, rate_share=fleet.rate)
        replayer = Replayer(database, settings, sender, by, args.reason, selection=sel)
        try:
            # SIGTERM stops the replay as Ctrl-C does: it settles what it holds, then exits.
            with sigterm_raises(), _progress(len(docs), "replay") as bar:
                task = bar.add_task("replaying", total=len(docs))
                counts = replayer.run(docs, progress=lambda n: bar.advance(task, n))
        except BaseException as exc:
            done = ", ".join(f"{k} {v}" for k, v in sorted(replayer.counts.items()))
            print(f"replay stopped ({type(exc).__name__}: {exc}): {done or 'nothing done'}")
            raise
        finally:
            sender.close()
            fleet.stop()
    finally:
        database.client.close()
    print("replayed: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


def cmd_rebuild(args: argparse.Namespace, settings: Settings) -> int:
    from creator.rearm import STOPPED_MARGIN_S, count_pending
    from creator.service import open_planner

    with open_planner(settings) as planner:
        total = count_pending(planner, EPOCH, FAR)
        with _progress(total, "rebuild") as bar:
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
        c = settings.creator
        after = int(c.lead_seconds + c.wakeup_window_seconds + STOPPED_MARGIN_S)
        print(
            f"{done.held} of them held by a consumer that may still be running: left to it "
            f"(if it stopped, run rebuild again once its guards are {after} s old)"
        )
    return 0


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from ops import doctor

    checks = doctor.run_checks(settings, fix_indexes=args.fix_indexes)
    doctor.render(checks)
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        print(f"{len(failed)} check(s) failed: " + ", ".join(c.name for c in failed))
        return 1
    print("all checks passed")
    return 0


def cmd_messages_show(args: argparse.Namespace, settings: Settings) -> int:
    from shared.store import db as dbm

    database = dbm.connect(settings.mongo)
    try:
        with dbm.translate_errors("reading the message"):
            msg = database[dbm.MESSAGES].find_one({"_id": args.message_id})
            if msg is None:
                raise NotFoundError(f"no message {args.message_id!r}")
            guard = database[dbm.SENDS].find_one({"_id": args.message_id})
            token = database[dbm.TOKENS].find_one({"_id": msg.get("notificationTokenId")})
    finally:
        database.client.close()
    out = {
        "message": msg,
        "sendGuard": guard,
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
    from shared.store.history import as_time

    at = as_time(t)
    return "" if at is None else at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cmd_messages_list(args: argparse.Namespace, settings: Settings) -> int:
    """The user's messages due in ``[--since, --until)``, oldest first (the HTTP API's read:
    ``shared.store.history.messages_page``), and the command that shows the next ones."""
    from shared.domain.validation import validate_id
    from shared.store import db as dbm
    from shared.store.history import messages_page
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
    from shared.store.history import as_time

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


def _register_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="the whole pipeline on the local stack, watched live")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--until-done", action="store_true", help="stop when everything has ended")
    p.add_argument("--database", default="tzpush_demo", help="demo database (wiped at start)")
    p.add_argument("--fake-port", type=int, help="Expo fake port (default local.fake_expo_port)")
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--minutes", type=int, default=3, help="reminders spread over N minutes")
    p.add_argument("--min-lead", type=float, default=40.0, help="first due at least N s ahead")
    p.add_argument("--no-services", action="store_true", help="use an already running stack")
    p.add_argument("--plain", action="store_true", help="log lines instead of the live view")
    p.add_argument("--summary-json", help="also write the summary to this file")
    p.add_argument("--no-api", action="store_true", help="do not start the HTTP API")
    p.add_argument("--api-port", type=int, help="API port (default TZPUSH_API__PORT)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    import signal

    from shared import logs

    def _interrupt(*_: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the demo as Ctrl-C does: cleanly, with a summary

    signal.signal(signal.SIGTERM, _interrupt)
    logs.setup("WARNING", False)
    from ops.demo import DemoOptions, run_demo

    opts = DemoOptions(
        duration=args.duration,
        database=args.database,
        fake_port=args.fake_port,
        users=args.users,
        minutes=max(1, args.minutes),
        min_lead_s=args.min_lead,
        until_done=args.until_done,
        services=not args.no_services,
        live=False if args.plain else None,
        summary_json=args.summary_json,
        api=not args.no_api,
        api_port=args.api_port,
    )
    run_demo(settings, opts)
    return 0
