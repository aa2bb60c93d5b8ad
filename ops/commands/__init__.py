"""Operator commands: ``tzpush stats|replay|rebuild|doctor|messages show|list|demo``.

One module per command, each with ``register(subparsers)`` (``ops.cli.COMMANDS`` names it) and
its handler. Thin wiring: parse options, open connections from settings, call the module that
does the work (``ops.stats``, ``ops.replay``, ``ops.doctor``, ``ops.demo``) and print. Heavy
imports happen inside the handlers so ``tzpush --help`` stays fast; this package imports none
of its commands until asked.
"""

from __future__ import annotations

import argparse
import importlib

MODULES = ("stats", "replay", "rebuild", "doctor", "messages", "demo")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Registers every operator command (each module's ``register``), in the order of ``--help``."""
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
