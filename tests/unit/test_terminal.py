"""The CLI's tables print user text as typed: markup in ids or labels is never interpreted."""

from __future__ import annotations

import json

from shared.terminal import print_rows

COLUMNS = {"id": "_id", "label": lambda r: r["label"], "missing": "nope"}


def test_markup_in_user_text_is_printed_as_typed(capsys):
    rows = [{"_id": "u[1]", "label": "[/bold] pill [red]now[/red]"}]
    print_rows(rows, COLUMNS, title="reminders of [bold]x", as_json=False)
    out = capsys.readouterr().out
    assert "[/bold] pill [red]now[/red]" in out
    assert "u[1]" in out and "[bold]x" in out


def test_json_rows_are_the_documents(capsys):
    rows = [{"_id": "a", "label": "b", "n": 1}]
    print_rows(rows, COLUMNS, title="t", as_json=True)
    assert json.loads(capsys.readouterr().out) == rows


def test_piped_tables_are_not_wrapped_so_ids_stay_whole_on_their_line(capsys):
    long_id = "user-" + "x" * 150 + ":reminder-" + "y" * 60
    rows = [{"_id": long_id, "label": "lunch", "nope": "weekdays"}]
    print_rows(rows, COLUMNS, title="reminders", as_json=False)
    lines = capsys.readouterr().out.splitlines()
    assert any(long_id in line and "lunch" in line for line in lines), "\n".join(lines)
    assert not any(line.strip("│ ").startswith("s ") for line in lines)


def test_a_terminal_keeps_its_own_width():
    from shared.terminal import console

    assert console(is_terminal=True, width=80).width == 80
    assert console(is_terminal=False).width >= 10_000
