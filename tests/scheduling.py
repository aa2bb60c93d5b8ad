"""In which order `make test`'s workers take the test files (pytest-xdist ``--dist loadfile``).

xdist's own loadfile order puts the files with the most tests first, so the single-test files
that run for minutes (the chaos run, the bench, the demo, the downtime drill) started last and set
the suite's wall time by themselves. ``LongestFirst`` keeps loadfile's unit (a file runs whole on
one worker, so a module fixture starts once) and chooses which file a worker takes next:

- the longest file left, by the estimates below (longest processing time first);
- but a short one when the worker is still busy with a long file. A worker runs a test only once
  it knows the next one (for the fixtures' teardown), so it always holds one file ahead of the
  one it runs; without this rule the second-longest file would wait behind the longest.

The estimates only order the files: seconds measured on the 2-core machine (``--durations=0``)
for the files whose tests are far slower than ``PER_TEST_S``, rounded. A file not listed counts
``PER_TEST_S`` per test. Nothing is asserted about them; a stale figure costs only order.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling

INTEGRATION = "tests/integration/"
PER_TEST_S = {INTEGRATION: 1.5, "tests/packaging/": 30.0}
UNIT_TEST_S = 0.05  # tests/unit, tests/contract: pure
# A worker whose pending tests are estimated at least this long takes a short file next.
BUSY_S = 20.0
ESTIMATES_S = {
    f"{INTEGRATION}{name}.py": seconds
    for name, seconds in {
        "test_chaos": 160,  # the 2-minute seeded chaos run, plus its stack and drain
        "test_demo": 140,  # waits for the next whole minute, twice
        "test_broker_failover": 100,
        "test_bench_quick": 90,
        "test_consumer_downtime": 65,  # the 60 s downtime is the scenario
        "test_consumer_faults": 55,
        "test_consumer_crash": 55,
        "test_stop_on_time": 50,
        "test_consumer_cancel": 35,
        "test_handover": 35,
        "test_console_browser": 35,
        "test_api_fuzz": 35,
        "test_api_write_races": 30,
        "test_replay_signals": 27,
        "test_consumer_concurrency": 26,
        "test_consumer_expo_errors": 24,
        "test_fleet_rate": 24,
        "test_recorder_merge": 23,
        "test_batch_equivalence": 22,
        "test_ops_rebuild": 21,
        "test_rebuild_takeover": 18,
        "test_chaos_clock": 16,
        "test_broker_auth": 16,
        "test_api_health_under_load": 14,
        "test_replays_from_consumers": 14,
        "test_console_sessions": 13,
        "test_docs_offline": 12,
        "test_consumer_deadletter": 11,
        "test_client_typescript": 11,
        "test_api_proxies": 10,
        "test_service_metrics": 10,
    }.items()
} | {"tests/packaging/test_wheel.py": 75, "tests/unit/test_deploy.py": 15}


def file_estimate_s(path: str, tests: int) -> float:
    """The estimated seconds of a whole test file of ``tests`` tests (its node id's path)."""
    if path in ESTIMATES_S:
        return ESTIMATES_S[path]
    per_test = next((s for prefix, s in PER_TEST_S.items() if path.startswith(prefix)), None)
    return tests * (UNIT_TEST_S if per_test is None else per_test)


class LongestFirst(LoadFileScheduling):
    """Loadfile scheduling that hands out the longest file first (see the module docstring)."""

    def _assign_work_unit(self, node: Any) -> None:
        """Puts the file this node should take next at the head of the queue, then lets
        loadfile assign it (it takes the head)."""

        def cost(scope: str) -> float:
            return file_estimate_s(scope, len(self.workqueue[scope]))

        busy = self._busy_s(node)
        pick = min if busy >= BUSY_S else max
        self.workqueue.move_to_end(pick(self.workqueue, key=cost), last=False)
        super()._assign_work_unit(node)

    def _busy_s(self, node: Any) -> float:
        """The estimated seconds of the tests this node holds and has not finished."""
        total = 0.0
        for scope, tests in self.assigned_work.get(node, {}).items():
            left = sum(1 for done in tests.values() if not done)
            total += file_estimate_s(scope, len(tests)) * left / len(tests)
        return total
