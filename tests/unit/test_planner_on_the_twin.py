"""A real planning pass on the memory twin with a fake clock: what it inserts and arms, with no
database and no broker (a stub that records what it would schedule)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from creator.planner import Planner
from shared.clock import FakeClock
from shared.settings import Settings
from shared.store.memory import Tables, memory_creator_stores
from shared.wire import WakeUp, decode

T0 = dt.datetime(2026, 3, 2, 7, 0, tzinfo=dt.UTC)


class StubBroker:
    """What the wake-up publisher needs of a STOMP client, kept in memory (as dramatiq's
    ``StubBroker``): each wake-up scheduled, with its delay."""

    def __init__(self) -> None:
        self.connected = True
        self.sent: list[tuple[str, WakeUp, int]] = []
        self.flushes = 0

    def connect(self) -> StubBroker:
        self.connected = True
        return self

    def send(
        self, destination: str, body: bytes, *, delay_ms: int, headers: dict[str, str] | None
    ) -> None:
        self.sent.append((destination, decode(body), delay_ms))

    def flush(self) -> None:
        self.flushes += 1


def seeded(clock: FakeClock) -> Tables:
    """A user in Paris with an active and a turned-off registration and a lunch reminder, as
    raw documents (no bucket: the pass gives them theirs)."""
    tables = Tables(server_clock=clock)
    tables.put("users", {"_id": "u1", "timezone": "Europe/Paris", "prefs": {}})
    token = {"userId": "u1", "failureCount": 0}
    tables.put(
        "tokens",
        {"_id": "t1", "deviceId": "d1", "token": "ExponentPushToken[a]", "isActive": True, **token},
        {
            "_id": "t0",
            "deviceId": "d0",
            "token": "ExponentPushToken[b]",
            "isActive": False,
            **token,
        },
    )
    tables.put(
        "reminders",
        {
            "_id": "r1",
            "userId": "u1",
            "category": "meal",
            "label": "lunch",
            "time": "12:30",
            "title": "Lunch",
            "body": "time to eat",
            "active": True,
            "isDeleted": False,
            "version": 1,
        },
    )
    return tables


def test_a_pass_on_the_twin_inserts_and_arms_each_occurrence_once_for_active_tokens() -> None:
    clock = FakeClock(T0)
    tables = seeded(clock)
    broker = StubBroker()
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    planner = Planner(memory_creator_stores(tables), cast(Any, broker), settings, clock)

    report = planner.run_pass()

    # 12:30 in Paris (UTC+1 in March) within the day ahead: one occurrence, on the active token.
    due = dt.datetime(2026, 3, 2, 11, 30, tzinfo=dt.UTC)
    pending = [m for m in tables.messages.values() if m["status"] == "pending"]
    assert [
        (m["reminderId"], m["notificationTokenId"], m["scheduledAt"], m["localDate"])
        for m in pending
    ] == [("r1", "t1", due, "2026-03-02")]
    assert (report.inserted, report.wakeups) == (1, 1)
    ((queue, wakeup, delay_ms),) = broker.sent
    assert queue.endswith(".meal") and [i.id for i in wakeup.items] == [pending[0]["_id"]]
    lead = settings.wakeup.lead_seconds
    assert delay_ms == int(((due - T0).total_seconds() - lead) * 1000)
    assert broker.flushes == 1

    clock.advance(60)
    again = planner.run_pass()  # the window is planned: nothing inserted or armed twice
    assert (again.inserted, again.wakeups, len(tables.messages)) == (0, 0, 1)
