"""`make test`'s file order (tests/scheduling.py): the long files start first, side by side."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from xdist.remote import Producer

from tests.scheduling import LongestFirst, file_estimate_s

INT = "tests/integration/"
QUIET = Producer("test", enabled=False)
COLLECTION = [
    *(f"tests/unit/test_many.py::test_{i}" for i in range(40)),
    f"{INT}test_small.py::test_a",
    f"{INT}test_small.py::test_b",
    f"{INT}test_chaos.py::test_run",
    f"{INT}test_demo.py::test_one",
    f"{INT}test_demo.py::test_two",
    f"{INT}test_bench_quick.py::test_bench_tiny",
    f"{INT}test_consumer_downtime.py::test_down",
    "tests/unit/test_tiny.py::test_x",
]


class FakeNode:
    """What the scheduler asks of a worker: the indexes of the tests it is sent."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[str] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += [COLLECTION[i] for i in indexes]

    def shutdown(self) -> None:
        self.shutting_down = True


def _files(node: FakeNode) -> list[str]:
    return list(dict.fromkeys(nodeid.split("::")[0].rsplit("/", 1)[1] for nodeid in node.sent))


def _scheduled(workers: int) -> list[FakeNode]:
    config: Any = SimpleNamespace(
        getvalue=lambda name: {"tx": [f"{workers}*popen"]}[name],
        option=SimpleNamespace(loadscopereorder=True),
    )
    sched = LongestFirst(config, QUIET)
    nodes = [FakeNode(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, COLLECTION)
    sched.schedule()
    return nodes


def test_the_longest_files_start_first_each_on_a_worker_of_its_own() -> None:
    first = [_files(node)[0] for node in _scheduled(3)]
    assert first == ["test_chaos.py", "test_demo.py", "test_bench_quick.py"]


def test_a_worker_busy_with_a_long_file_holds_a_short_one_next() -> None:
    for node in _scheduled(3):
        assert len(_files(node)) == 2, node.sent
        assert _files(node)[1] in ("test_tiny.py", "test_small.py", "test_many.py"), node.sent


def test_an_unlisted_file_counts_its_tests() -> None:
    assert file_estimate_s(f"{INT}test_chaos.py", 1) == 160
    assert file_estimate_s(f"{INT}test_small.py", 2) == 3.0
    assert file_estimate_s("tests/unit/test_many.py", 40) == 2.0
