"""A user's zone change re-versions their reminders in bulk: the database commands it sends do
not grow with the number of reminders (it was four round trips a reminder, about 35 ms each:
a batch of 50 zone changes of a user with 200 reminders took 214 s and starved the API), and
the result is the same as one change at a time: every reminder at its next version, nothing of
an old version pending, the new zone's instants planned."""

from __future__ import annotations

from shared.domain.messages import Status
from shared.store import db as dbm
from tests.integration.command_log import commands_of


def _zone_change_commands(world, uid: str, reminders: int) -> int:
    m = world.manager()
    world.user(uid, "Asia/Tashkent", manager=m, device=f"{uid}-phone")
    for i in range(reminders):
        m.add_reminder(uid, category="meal", label=f"l{i}", at=f"{8 + i % 12:02d}:{i % 60:02d}")
    world.planner().run_pass()
    sent = commands_of(lambda: m.upsert_user(uid, timezone="Europe/Berlin"))
    return sum(1 for name, _ in sent if name not in ("endSessions", "hello"))


def test_a_zone_change_costs_the_same_few_commands_for_5_or_40_reminders(world):
    few = _zone_change_commands(world, "few", 5)
    many = _zone_change_commands(world, "many", 40)
    assert many <= few + 2, (few, many)
    db = world.db
    for uid, n in (("few", 5), ("many", 40)):
        rems = list(db[dbm.REMINDERS].find({"userId": uid}))
        assert len(rems) == n and {r.get("version") for r in rems} == {2}
        pending = list(db[dbm.MESSAGES].find({"userId": uid, "status": Status.PENDING.value}))
        assert pending and {p["reminderVersion"] for p in pending} == {2}
        assert {p["timezone"] for p in pending if "timezone" in p} <= {"Europe/Berlin"}
