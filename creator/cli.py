"""Commands: ``tzpush creator``, ``tzpush users``, ``tzpush reminders``, ``tzpush tokens``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from shared import logs
from shared.domain.validation import MAX_DAILY_CAP, shown
from shared.errors import InputError
from shared.settings import Settings
from shared.terminal import Cell, command, print_rows, subcommands


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "creator", "run the planner (a pass every few minutes)", cmd_creator)
    p.add_argument("--once", action="store_true", help="run one pass, print what it did, exit")

    users = subcommands(sub, "users", "manage users")
    u = command(users, "upsert", "create or change a user", cmd_users_upsert, "user_id")
    u.add_argument("--timezone", help="IANA zone, e.g. Asia/Tashkent")
    g = u.add_mutually_exclusive_group()
    g.add_argument(
        "--enable", dest="enabled", action="store_const", const=True, help="notifications on"
    )
    g.add_argument(
        "--disable", dest="enabled", action="store_const", const=False, help="notifications off"
    )
    u.add_argument("--category-on", action="append", default=[], metavar="C")
    u.add_argument("--category-off", action="append", default=[], metavar="C")
    u.add_argument("--quiet-hours", metavar="HH:MM-HH:MM|none")
    u.add_argument("--daily-cap", metavar="N|none")
    command(users, "show", "show a user", cmd_users_show, "user_id")
    e = command(
        users,
        "erase",
        "erase a user: pending pushes cancelled, devices, reminders and the user removed, "
        "message history kept anonymised",
        cmd_users_erase,
        "user_id",
    )
    e.add_argument("--yes", action="store_true", help="really erase (it cannot be undone)")

    rem = subcommands(sub, "reminders", "manage reminders")
    a = command(rem, "add", "add a reminder; prints its id", cmd_reminders_add, "user_id")
    _reminder_options(a, required=True)
    ls = command(rem, "list", "a user's reminders", cmd_reminders_list, "user_id")
    ls.add_argument("--json", action="store_true")
    up = command(rem, "update", "change a reminder", cmd_reminders_update, "reminder_id")
    _reminder_options(up, required=False)
    g2 = up.add_mutually_exclusive_group()
    g2.add_argument("--pause", dest="active", action="store_const", const=False)
    g2.add_argument("--resume", dest="active", action="store_const", const=True)
    command(rem, "remove", "remove a reminder", cmd_reminders_remove, "reminder_id")

    tok = subcommands(sub, "tokens", "manage device tokens")
    r = command(
        tok, "register", "register a device's Expo push token", cmd_tokens_register, "user_id"
    )
    r.add_argument("--device", required=True)
    r.add_argument("--token", required=True)
    un = command(tok, "unregister", "deactivate a token", cmd_tokens_unregister)
    un.add_argument("--token")
    un.add_argument("--device")
    lo = command(
        tok,
        "logout",
        "deactivate this user's registration of a device",
        cmd_tokens_logout,
        "user_id",
    )
    lo.add_argument("--device", required=True)
    tl = command(tok, "list", "a user's tokens", cmd_tokens_list, "user_id")
    tl.add_argument("--json", action="store_true")


def _reminder_options(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument("--category", required=required)
    p.add_argument("--label", required=required)
    p.add_argument("--at", required=required, metavar="HH:MM", help="local time of day")
    p.add_argument("--offset-minutes", type=int, default=None, help="remind N minutes after")
    p.add_argument("--weekdays", default=None, help="e.g. mon,wed,fri (default every day)")
    p.add_argument("--title")
    p.add_argument("--body")
    p.add_argument("--data", help="JSON object sent with the push")


def _data(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        val = json.loads(raw)
    except ValueError as exc:
        raise InputError(f"--data is not valid JSON: {exc}") from None
    if not isinstance(val, dict):
        raise InputError("--data must be a JSON object")
    return val


def cmd_creator(args: argparse.Namespace, settings: Settings) -> int:
    from creator.service import run_once, run_service  # lazy: APScheduler, pymongo

    logs.setup(settings.log_level, settings.log_json)
    if args.once:
        print(run_once(settings))
        return 0
    return run_service(settings)


def cmd_users_upsert(args: argparse.Namespace, settings: Settings) -> int:
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    quiet: Any = False
    if args.quiet_hours is not None:
        if args.quiet_hours.lower() == "none":
            quiet = None
        else:
            parts = args.quiet_hours.split("-")
            if len(parts) != 2:
                raise InputError(
                    f"--quiet-hours {shown(args.quiet_hours)}: use HH:MM-HH:MM or none"
                )
            quiet = (parts[0], parts[1])
    cap: Any = False
    if args.daily_cap is not None:
        if args.daily_cap.lower() == "none":
            cap = None
        else:
            try:
                cap = int(args.daily_cap)
            except ValueError:
                raise InputError(
                    f"--daily-cap {shown(args.daily_cap)}: use a whole number from 1 to "
                    f"{MAX_DAILY_CAP}, or none"
                ) from None
    cats = {c: True for c in args.category_on} | {c: False for c in args.category_off}
    with open_manager(settings) as m:
        user = m.upsert_user(
            args.user_id,
            timezone=args.timezone,
            enabled=args.enabled,
            categories=cats or None,
            quiet_hours=quiet,
            daily_cap=cap,
        )
    print(f"user {user['_id']} ({user['timezone']})")
    return 0


def cmd_users_show(args: argparse.Namespace, settings: Settings) -> int:
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    with open_manager(settings) as m:
        user = m.get_user(args.user_id)
    print(json.dumps(user, default=str, indent=2))
    return 0


def cmd_users_erase(args: argparse.Namespace, settings: Settings) -> int:
    from creator.accounts import erase_user
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    if not args.yes:
        raise InputError(
            f"erasing {shown(args.user_id)} cannot be undone: add --yes to erase the user"
        )
    with open_manager(settings) as m:
        done = erase_user(m, args.user_id)
    print(
        f"user {shown(args.user_id)} erased: {done.cancelled} pending cancelled, "
        f"{done.tokens} devices deactivated, {done.reminders} reminders removed, "
        f"{done.history} messages kept anonymised"
    )
    return 0


def cmd_reminders_add(args: argparse.Namespace, settings: Settings) -> int:
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    with open_manager(settings) as m:
        r = m.add_reminder(
            args.user_id,
            category=args.category,
            label=args.label,
            at=args.at,
            offset_minutes=args.offset_minutes or 0,
            weekdays=args.weekdays,
            title=args.title,
            body=args.body,
            data=_data(args.data),
        )
    print(r["_id"])
    return 0


def cmd_reminders_list(args: argparse.Namespace, settings: Settings) -> int:
    return _list(args, settings, "reminders", REMINDER_COLUMNS)


def _list(args: argparse.Namespace, settings: Settings, what: str, columns: dict[str, Cell]) -> int:
    """``tzpush <what> list USER``: the user's reminders or tokens, as a table or JSON."""
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    with open_manager(settings) as m:
        rows = getattr(m, f"list_{what}")(args.user_id)
    print_rows(rows, columns, title=f"{what} of {args.user_id}", as_json=args.json)
    return 0


REMINDER_COLUMNS: dict[str, Cell] = {
    **{"id": "_id", "category": "category", "label": "label", "at": "time"},
    "offset": "offsetMinutes",
    "weekdays": lambda r: ",".join(map(str, r["weekdays"])) if r.get("weekdays") else "every day",
    **{"active": "active", "version": "version"},
}


def cmd_reminders_update(args: argparse.Namespace, settings: Settings) -> int:
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    changes = {
        "category": args.category,
        "label": args.label,
        "at": args.at,
        "offset_minutes": args.offset_minutes,
        "title": args.title,
        "body": args.body,
        "data": _data(args.data),
        "active": args.active,
    }
    changes = {k: v for k, v in changes.items() if v is not None}
    if args.weekdays is not None:
        changes["weekdays"] = None if args.weekdays in ("", "all") else args.weekdays
    if not changes:
        raise InputError("nothing to change: give at least one option")
    with open_manager(settings) as m:
        r = m.update_reminder(args.reminder_id, **changes)
    print(f"reminder {r['_id']} now version {r['version']}")
    return 0


def cmd_reminders_remove(args: argparse.Namespace, settings: Settings) -> int:
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    with open_manager(settings) as m:
        m.remove_reminder(args.reminder_id)
    print(f"reminder {args.reminder_id} removed")
    return 0


def cmd_tokens_register(args: argparse.Namespace, settings: Settings) -> int:
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    with open_manager(settings) as m:
        t = m.register_token(args.user_id, device=args.device, token=args.token)
    print(t["_id"])
    return 0


def cmd_tokens_unregister(args: argparse.Namespace, settings: Settings) -> int:
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    with open_manager(settings) as m:
        n = m.unregister_token(token=args.token, device=args.device)
    print(f"{n} token(s) deactivated")
    return 0


def cmd_tokens_logout(args: argparse.Namespace, settings: Settings) -> int:
    from creator.accounts import logout
    from creator.service import open_manager  # lazy: APScheduler, pymongo

    with open_manager(settings) as m:
        n = logout(m, args.user_id, args.device)
    print(f"{n} registration(s) of device {shown(args.device)} deactivated")
    return 0


def cmd_tokens_list(args: argparse.Namespace, settings: Settings) -> int:
    return _list(args, settings, "tokens", TOKEN_COLUMNS)


TOKEN_COLUMNS: dict[str, Cell] = {
    **{"id": "_id", "device": "deviceId", "token": "token", "active": "isActive"},
    **{"failures": "failureCount", "deactivation": "deactivationReason"},
}
