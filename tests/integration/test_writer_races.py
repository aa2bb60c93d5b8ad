"""The writers' version check, with the race placed exactly (no timing): a change of a reminder
that gets in between a batch's write of it and the batch's planning of it."""

from __future__ import annotations

from typing import Any

import pytest

from creator import upserts
from shared.store import db as dbm
from tests.integration.harness import World
from tests.integration.test_api_support import soon_hhmm

ZONE = "Asia/Tashkent"


def test_a_change_between_a_batchs_write_and_its_planning_leaves_only_the_change_pending(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch creates a user with a device and a reminder, and plans the new user from the
    documents it holds (version 1). Another call changes the reminder's time in between
    (version 2, planned at once). The batch's planning of version 1 comes after that change's
    cancel: only version 2 may stay pending, once."""
    world.planner().run_pass()
    m, other = world.manager(), world.manager()
    real = m.planner.plan_users
    changed: list[Any] = []

    def the_other_change_first(*a: Any, **kw: Any) -> Any:
        if not changed:
            changed.append(other.update_reminder("nia-r", at=soon_hhmm(ZONE, 120)))
        return real(*a, **kw)

    monkeypatch.setattr(m.planner, "plan_users", the_other_change_first)
    spec = upserts.ReminderSpec("meal", "lunch", soon_hhmm(ZONE, 90))
    out = upserts.apply(
        m,
        [
            upserts.UserChange("nia", timezone=ZONE),
            upserts.Login("nia", "nia-phone", "ExponentPushToken[nia]"),
            upserts.ReminderPut("nia", "nia-r", spec),
        ],
    )
    assert all(isinstance(o, upserts.Done) for o in out), out
    assert changed and changed[0]["version"] == 2
    pending = list(world.db[dbm.MESSAGES].find({"reminderId": "nia-r", "status": "pending"}))
    assert [d["reminderVersion"] for d in pending] == [2], pending
