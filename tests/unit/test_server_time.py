"""``ServerTime``: the clock a consumer holds due instants by never runs ahead of the database
server's, whatever this host's clock says (chaos invariant 4: no push before its due instant)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from shared.errors import TransientError
from shared.store import db as dbm
from shared.store.server_time import ServerTime

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


class _Admin:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def command(self, name: str) -> dict[str, Any]:
        return self.answer()


class _Database:
    """What ``dbm.server_clock`` reads of a database: ``client.admin.command("hello")``."""

    def __init__(self, answer: Any) -> None:
        self.client = type("Client", (), {"admin": _Admin(answer)})()


def test_a_failed_first_read_is_tried_again_soon_not_after_the_whole_period() -> None:
    """Under load the first read failed; the consumer then held by its own clock, 4 s ahead,
    for five minutes (test_chaos_clock sent 10 pushes early)."""
    local = [T0 + dt.timedelta(seconds=4)]  # this host runs 4 s ahead of the server
    reads = []

    def answer() -> dict[str, Any]:
        reads.append(local[0])
        if len(reads) == 1:
            raise TransientError("database unavailable (injected)")
        return {"localTime": local[0] - dt.timedelta(seconds=4)}

    clock = ServerTime(_Database(answer), lambda: local[0])  # type: ignore[arg-type]
    assert clock() == local[0]  # nothing known yet: this host's clock
    local[0] += dt.timedelta(seconds=2)
    assert abs((clock() - (local[0] - dt.timedelta(seconds=4))).total_seconds()) < 0.05
    assert len(reads) == 2


def test_a_slow_read_errs_late_never_early() -> None:
    """The server may read its clock at any moment of a slow round trip: the estimate takes
    the moment that makes "now" the earliest, so a hold ends late rather than early."""
    started = time.time()

    def answer() -> dict[str, Any]:
        time.sleep(0.3)  # the server answers at the end of the round trip
        return {"localTime": dt.datetime.now(dt.UTC)}

    clock = ServerTime(_Database(answer))  # type: ignore[arg-type]
    clock()  # reads the server
    estimate = clock()  # by the distance it read
    assert estimate <= dt.datetime.now(dt.UTC)
    assert estimate.timestamp() >= started


@pytest.fixture(autouse=True)
def _no_translation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dbm, "translate_errors", _passthrough)


class _passthrough:
    def __init__(self, what: str) -> None:
        pass

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
