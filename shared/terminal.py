"""What the command line prints: tables and JSON, every cell escaped, and sub-command groups.

One place for the CLI's output, so that text that came from a user (ids, labels, tokens,
deactivation reasons) can never be read as rich markup: ``[bold]`` in a label is printed as
typed, and ``[/x]`` cannot crash a listing. ``rich`` is imported only when a table is printed
(the consumer's start-up never pays for it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from typing import Any

UNWRAPPED_WIDTH = 100_000
"""The width a table is laid out in when the output is not a terminal: a pipe or a file has no
width, so nothing is wrapped (an id split over lines cannot be searched or copied)."""

Cell = str | Callable[[dict[str, Any]], object]
"""A column's cell: the document's field of that name (empty when absent), or a function."""
Subparsers = argparse._SubParsersAction  # argparse keeps the class private


def subcommands(sub: Subparsers[argparse.ArgumentParser], name: str, help: str) -> Subparsers[Any]:
    """A command whose first argument is an action: ``tzpush <name> <action> ...``."""
    return sub.add_parser(name, help=help).add_subparsers(dest="action", required=True)


def command(
    parent: Subparsers[Any], name: str, help: str, func: Callable[..., int], *positionals: str
) -> argparse.ArgumentParser:
    """A leaf command: its positional arguments, and ``func(args, settings)`` to run it."""
    parser: argparse.ArgumentParser = parent.add_parser(name, help=help)
    for positional in positionals:
        parser.add_argument(positional)
    parser.set_defaults(func=func)
    return parser


def printable(text: str) -> str:
    """``text`` with each character a terminal would act on (escape sequences, control
    characters) shown as its escape (``\\x1b``), so a stored text cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def print_rows(
    rows: Iterable[dict[str, Any]], columns: dict[str, Cell], *, title: str, as_json: bool
) -> None:
    """Print ``rows`` as indented JSON (``as_json``) or as a table of ``columns``."""
    rows = list(rows)
    if as_json:
        print(json.dumps(rows, default=str, indent=2))
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title))
    for name in columns:
        table.add_column(name, overflow="fold")  # a long id wraps whole, never cut short
    for row in rows:
        cells = (c(row) if callable(c) else row.get(c, "") for c in columns.values())
        table.add_row(*(escape(printable(str(cell))) for cell in cells))
    console().print(table)


def console(
    *, stderr: bool = False, is_terminal: bool | None = None, width: int | None = None
) -> Any:
    """A rich Console for the CLI: a terminal's own width, or (piped, redirected) so wide that no
    table is wrapped. ``is_terminal`` and ``width`` override what is detected (tests)."""
    from rich.console import Console

    probe = Console(stderr=stderr, force_terminal=is_terminal, width=width)
    if probe.is_terminal:
        return probe
    return Console(stderr=stderr, force_terminal=False, width=width or UNWRAPPED_WIDTH)
