"""``tzpush replay``: send is_missed (or failed) messages again, each at most once."""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import sys
import uuid

from ops.commands.common import progress_bar
from shared.domain.messages import Status
from shared.errors import InputError
from shared.instants import parse_instant
from shared.settings import Settings
from shared.terminal import command


def _csv(raw: str | None) -> list[str]:
    return [x.strip() for x in (raw or "").split(",") if x.strip()]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds the command and its options to ``sub``."""
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


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    """Replays the selection (confirmed first, unless ``--yes``); returns 0, or 1 if declined."""
    from ops.replay import Replayer, Selection, resume, select, sigterm_raises
    from shared import metrics
    from shared.expo.sender import ExpoSender
    from shared.store import db as dbm
    from shared.store import replays
    from shared.store.fleet import FleetShare
    from shared.store.mongo.replays import MongoReplays

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
            stale = replays.stale_holders(MongoReplays(database), dt.datetime.now(dt.UTC))
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
            with sigterm_raises(), progress_bar(len(docs)) as bar:
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
