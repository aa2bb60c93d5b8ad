"""An independent checker of a chaos run (issue 33): it reads only what a run recorded.

It imports nothing of tzpush (an import-linter contract in pyproject.toml forbids it): the
recorded API history, what the Expo fake received, the fault log and a dump of the final
database are its whole input, and it computes every due instant on its own with zoneinfo.
`chaoscheck.run.check(run_dir)` returns the verdicts; ``python -m chaoscheck RUN_DIR`` prints
them, writes ``report.json`` and draws ``run.png`` in the run's folder.
"""
