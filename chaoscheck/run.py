"""Load a run's folder, check the six invariants, print the verdicts, write report.json.

A run's folder holds ``meta.json`` (seed, window_s, grace per category, workload_start,
cutoff), ``history.jsonl`` (the API requests), ``pushes.json`` (what the Expo fake received),
``faults.jsonl`` (each fault as it happened: kind, target, start, end) and ``db.json`` (the
final database, collection -> documents, instants as ISO 8601).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaoscheck import history as hist
from chaoscheck import invariants as inv
from chaoscheck import outcomes

Doc = dict[str, Any]
CHECKS: list[tuple[str, Callable[[inv.Run], tuple[int, list[Doc]]]]] = [
    ("1 no duplicate per occurrence and install", inv.no_duplicates),
    ("2 no push after the install left the user", inv.no_push_after_install_left),
    ("3 no push for intent withdrawn before the window", inv.no_push_for_withdrawn_intent),
    ("4 no push before its due instant", inv.nothing_early),
    ("5 every occurrence terminal with an honest reason", outcomes.every_occurrence_ends),
    ("6 nothing of an erased user left", outcomes.nothing_of_erased_left),
]
SHOWN = 3


def load(run_dir: Path) -> inv.Run:
    """The run recorded in ``run_dir``."""
    faults_path = run_dir / "faults.jsonl"
    faults = [json.loads(x) for x in faults_path.read_text().splitlines() if x.strip()]
    return inv.Run(
        meta=json.loads((run_dir / "meta.json").read_text()),
        history=hist.load(run_dir / "history.jsonl"),
        pushes=json.loads((run_dir / "pushes.json").read_text()),
        faults=faults,
        db=json.loads((run_dir / "db.json").read_text()),
    )


def check(run: inv.Run) -> Doc:
    """Every invariant's verdict: name, ok, checked, violations (all of them)."""
    verdicts = []
    for name, fn in CHECKS:
        checked, bad = fn(run)
        verdicts.append({"name": name, "ok": not bad, "checked": checked, "violations": bad})
    counts = {
        "requests": len(run.history.records),
        "changes": len(run.history.changes),
        "faults": len(run.faults),
        "pushes": len(run.pushes),
        "messages": len(run.db.get("notification_messages", [])),
    }
    return {"ok": all(v["ok"] for v in verdicts), "counts": counts, "verdicts": verdicts}


def print_report(report: Doc) -> None:
    print("counts: " + ", ".join(f"{k} {v}" for k, v in report["counts"].items()))
    for v in report["verdicts"]:
        word = "ok  " if v["ok"] else "FAIL"
        print(f"{word} {v['name']}: {v['checked']} checked, {len(v['violations'])} violations")
        for bad in v["violations"][:SHOWN]:
            print("     " + json.dumps(bad, default=str, indent=1).replace("\n", "\n     "))


def check_dir(run_dir: Path, *, picture: bool = True) -> Doc:
    """Check the run in ``run_dir``, print the verdicts, write report.json (and run.png)."""
    run = load(run_dir)
    report = check(run)
    print_report(report)
    (run_dir / "report.json").write_text(json.dumps(report, default=str, indent=1))
    if picture:
        from chaoscheck.picture import draw

        draw(run, report, run_dir / "run.png")
    return report
