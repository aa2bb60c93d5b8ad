"""The ``tzpush`` command: one CLI, subcommands registered by the modules that own them.

Each module named in ``COMMANDS`` exposes ``register(subparsers)`` which adds its
subcommands and sets ``func=handler`` on each; a handler takes ``(args, settings)`` and returns
an exit code. Settings are read once here, never deeper.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from shared.errors import InputError, NotFoundError, TzpushError

# Which module registers each command, so a command imports only its own module: a consumer
# restarting after an outage is sending sooner without the demo's, the fake's and the
# planner's imports. A test keeps this in step with what the modules register.
COMMANDS: dict[str, str] = {
    "services": "devstack.cli",
    "fake-expo": "devstack.cli",
    "creator": "creator.cli",
    "users": "creator.cli",
    "reminders": "creator.cli",
    "tokens": "creator.cli",
    "consumer": "consumer.cli",
    "receipts": "consumer.cli",
    "stats": "ops.commands.stats",
    "replay": "ops.commands.replay",
    "rebuild": "ops.commands.rebuild",
    "doctor": "ops.commands.doctor",
    "messages": "ops.commands.messages",
    "demo": "ops.commands.demo",
    "api": "api.cli",
}
COMMAND_MODULES: list[str] = list(dict.fromkeys(COMMANDS.values()))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with only ``command``'s module when it is known."""
    parser = argparse.ArgumentParser(
        prog="tzpush",
        description="Recurring push reminders at each user's own local time.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    modules = [COMMANDS[command]] if command in COMMANDS else COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # Start-up is imports (pydantic, pymongo, the command's modules) that allocate many objects
    # and free none: the cyclic GC has nothing to find there, yet its passes cost about a tenth
    # of a consumer's restart. Off while importing; then what was imported is frozen out of
    # later collections.
    gc_was_on = gc.isenabled()
    gc.disable()
    # pydantic looks for plugins by scanning every installed distribution's entry points when the
    # first model is built (about 50 ms of each start here); tzpush uses none. Set the variable
    # to "" to have them looked for again.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        from shared.settings import Settings, SettingsError

        parser = build_parser(words[0] if words else None)
        args = parser.parse_args(words)
        try:
            settings = Settings.load()
        except SettingsError as exc:
            print(f"tzpush: {exc}", file=sys.stderr)
            return 2
    finally:
        if gc_was_on:
            gc.freeze()
            gc.enable()
    try:
        return int(args.func(args, settings) or 0)
    except (InputError, NotFoundError) as exc:
        print(f"tzpush: {exc}", file=sys.stderr)
        return 2
    except TzpushError as exc:
        print(f"tzpush: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
