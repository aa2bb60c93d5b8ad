"""The management writers over the memory twin: they build with no MongoDB, and what they read
of users and reminders comes from the accounts stores (``shared.store.abc_accounts``)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pytest

from creator.planner import Planner
from creator.writers import Writers
from shared.errors import NotFoundError
from shared.settings import Settings
from shared.store.memory import Tables, memory_creator_stores
from shared.store.partitions import Membership

NOW = dt.datetime(2026, 3, 29, 8, 0, tzinfo=dt.UTC)


def writers(tables: Tables) -> Writers:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    stores = memory_creator_stores(tables)
    # Membership is the planning passes' (not used by these calls); it takes no stores yet.
    membership = Membership(cast(Any, None), settings.creator.partitions, 30)
    planner = Planner(stores, None, settings, lambda: NOW, membership=membership)
    return Writers(stores, planner, settings)


def test_writers_over_the_twin_read_users_and_reminders_from_it() -> None:
    t = Tables()
    t.put("users", {"_id": "u1", "timezone": "Asia/Tashkent", "createdAt": NOW})
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


def test_writers_over_the_twin_have_no_database() -> None:
    with pytest.raises(RuntimeError, match="not MongoDB"):
        _ = writers(Tables()).db
