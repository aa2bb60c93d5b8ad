"""The management writers over the memory twin: they build with no MongoDB, and a user's life
(created, a reminder planned, erased) goes through the creator's stores alone."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pytest

from creator.planner import Planner
from creator.writers import Writers
from creator.writers.reminders import ReminderSpec
from creator.writers.users import UserChange
from shared.clock import FakeClock
from shared.errors import NotFoundError
from shared.settings import Settings
from shared.store.memory import Tables, memory_creator_stores

T0 = dt.datetime(2026, 3, 2, 7, 0, tzinfo=dt.UTC)


class StubBroker:
    """What the wake-up publisher needs of a STOMP client: it counts what it would schedule."""

    connected = True
    sent = 0

    def connect(self) -> StubBroker:
        return self

    def send(self, destination: str, body: bytes, **_: Any) -> None:
        self.sent += 1

    def flush(self) -> None:
        pass


def writers(tables: Tables, broker: StubBroker | None = None) -> Writers:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    stores = memory_creator_stores(tables)
    clock = FakeClock(T0)
    return Writers(stores, Planner(stores, cast(Any, broker), settings, clock), settings)


def test_writers_over_the_twin_read_users_and_reminders_from_it() -> None:
    t = Tables()
    t.put("users", {"_id": "u1", "timezone": "Asia/Tashkent", "createdAt": T0})
    t.put(
        "reminders",
        {"_id": "r2", "userId": "u1", "time": "18:00", "label": "b", "isDeleted": False},
        {"_id": "r1", "userId": "u1", "time": "08:00", "label": "a", "isDeleted": False},
        {"_id": "r0", "userId": "u1", "time": "07:00", "label": "z", "isDeleted": True},
    )
    w = writers(t)
    assert w.get_user("u1")["timezone"] == "Asia/Tashkent"
    with pytest.raises(NotFoundError):
        w.get_user("nobody")
    assert [r["_id"] for r in w.reminders.of_user("u1")] == ["r1", "r2"]
    assert [r["_id"] for r in w.reminders.of_user("u1", include_deleted=True)] == [
        "r0",
        "r1",
        "r2",
    ]
    assert w.reminders.get("r1")["time"] == "08:00"
    with pytest.raises(NotFoundError):
        w.reminders.get("r9")
    with pytest.raises(RuntimeError, match="not MongoDB"):
        _ = w.db


def test_a_user_created_planned_and_erased_on_the_twin_leaves_nothing_of_theirs() -> None:
    t = Tables()
    broker = StubBroker()
    w = writers(t, broker)
    w.planner.run_pass()  # a planned window: from now on a change plans at once
    w.users.upsert(UserChange("u1", timezone="Europe/Paris"))
    w.logins.register("u1", device="d1", token="ExponentPushToken[a]")
    w.reminders.put("u1", "r1", ReminderSpec("meal", "lunch", "12:30", title="Lunch"))
    assert w.planner.run_pass().inserted == 0  # planned by the changes already
    [pending] = [m for m in t.messages.values() if m["status"] == "pending"]
    assert (pending["reminderId"], pending["title"]) == ("r1", "Lunch") and broker.sent

    erased = w.erasure.erase("u1")

    assert (erased.cancelled, erased.tokens, erased.reminders) == (1, 1, 1)
    assert not t.users and not t.reminders and not t.tokens
    [message] = t.messages.values()
    assert (message["status"], message["reason"]) == ("cancelled", "user erased")
    assert message["userId"].startswith("erased-") and message["title"] is None
