"""The CLI imports only the module of the command it runs; the map it uses stays complete."""

from __future__ import annotations

import argparse
import subprocess
import sys

from ops.cli import COMMAND_MODULES, COMMANDS, build_parser


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(action.choices)


def test_every_registered_command_is_mapped_to_its_module():
    assert _commands(build_parser()) == set(COMMANDS)
    assert set(COMMANDS.values()) == set(COMMAND_MODULES)
    for command, module in COMMANDS.items():
        assert command in _commands(build_parser(command)), (command, module)


def test_unknown_or_missing_command_gets_the_full_parser():
    assert _commands(build_parser("nope")) == set(COMMANDS)
    assert _commands(build_parser(None)) == set(COMMANDS)


def test_the_consumer_command_does_not_import_the_other_commands():
    code = (
        "import sys; from ops.cli import build_parser; build_parser('consumer'); "
        "print(','.join(m for m in ('devstack.fake_expo', 'ops.commands', 'creator.cli', "
        "'creator.planner', 'devstack.cli', 'devstack.stack', 'consumer.receipts', 'rich', "
        "'shared.expo.sender', 'requests') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
