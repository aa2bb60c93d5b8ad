"""The ``tzpush`` command: one CLI, subcommands registered by the modules that own them.

Each module listed in ``COMMAND_MODULES`` exposes ``register(subparsers)`` which adds its
subcommands and sets ``func=handler`` on each; a handler takes ``(args, settings)`` and returns
an exit code. Settings are read once here, never deeper.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from shared.errors import InputError, NotFoundError, TzpushError
from shared.settings import Settings, SettingsError

COMMAND_MODULES: list[str] = [
    "shared.services",
    "shared.fake_expo",
    "creator.cli",
    "consumer.cli",
    "shared.ops",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tzpush",
        description="Recurring push reminders at each user's own local time.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # not written yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings.load()
    except SettingsError as exc:
        print(f"tzpush: {exc}", file=sys.stderr)
        return 2
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
