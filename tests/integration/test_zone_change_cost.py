"""A user's zone change re-versions their reminders in bulk: the database commands it sends do
not grow with the number of reminders (it was four round trips a reminder, about 35 ms each:
a batch of 50 zone changes of a user with 200 reminders took 214 s and starved the API), and
the result is the same as one change at a time: every reminder at its next version, nothing of
an old version pending, the new zone's instants planned."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from pymongo import monitoring

from shared.domain.messages import Status
from shared.store import db as dbm


class _Count(monitoring.CommandListener):
    def __init__(self) -> None:
        self.on = False
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.on:
            with self.lock:
                self.seen[event.command_name] += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


_COUNT = _Count()
monitoring.register(_COUNT)


@pytest.fixture
def count() -> Iterator[_Count]:
    _COUNT.seen.clear()
    yield _COUNT
    _COUNT.on = False


def _zone_change_commands(world, count, uid: str, reminders: int) -> int:
    m = world.manager()
    world.user(uid, "Asia/Tashkent", manager=m, device=f"{uid}-phone")
    for i in range(reminders):
        m.add_reminder(uid, category="meal", label=f"l{i}", at=f"{8 + i % 12:02d}:{i % 60:02d}")
    world.planner().run_pass()
    count.seen.clear()
    count.on = True
    m.upsert_user(uid, timezone="Europe/Berlin")
    count.on = False
    return sum(n for name, n in count.seen.items() if name not in ("endSessions", "hello"))


def test_a_zone_change_costs_the_same_few_commands_for_5_or_40_reminders(world, count):
    few = _zone_change_commands(world, count, "few", 5)
    many = _zone_change_commands(world, count, "many", 40)
    assert many <= few + 2, (few, many)
    db = world.db
    for uid, n in (("few", 5), ("many", 40)):
        rems = list(db[dbm.REMINDERS].find({"userId": uid}))
        assert len(rems) == n and {r.get("version") for r in rems} == {2}
        pending = list(db[dbm.MESSAGES].find({"userId": uid, "status": Status.PENDING.value}))
        assert pending and {p["reminderVersion"] for p in pending} == {2}
        assert {p["timezone"] for p in pending if "timezone" in p} <= {"Europe/Berlin"}
