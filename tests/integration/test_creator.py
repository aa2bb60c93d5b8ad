"""Creator on the real broker and database: planning, idempotence, crash safety, changes."""

from __future__ import annotations

import datetime as dt
import queue
import threading
from collections import Counter
from typing import Any

import pytest

from creator.partition_pass import PartitionPass
from creator.planner import PassReport, Planner
from shared.broker import Frame, StompClient
from shared.domain.plan import Doc
from shared.errors import InputError
from shared.store import db as dbm
from shared.wire import WakeUp, decode
from tests.integration.harness import World, wait_for

FIXED_NOW = dt.datetime(2026, 10, 24, 0, 0, tzinfo=dt.UTC)


def fixed_clock() -> dt.datetime:
    return FIXED_NOW


def drain(world: World, category: str, expect_at_least: int, timeout: float = 20.0) -> list[Frame]:
    """Receive wake-ups from a category queue until none arrive for a moment."""
    inbox: queue.Queue[Frame] = queue.Queue()
    client = StompClient(world.settings, inbox=inbox).connect()
    world.clients.append(client)
    client.subscribe(world.settings.queue(category), prefetch=1000)
    frames: list[Frame] = []
    deadline = threading.Event()
    while not deadline.is_set():
        try:
            f = inbox.get(timeout=2.0 if len(frames) >= expect_at_least else timeout)
        except queue.Empty:
            break
        frames.append(f)
        client.ack(f)
    return frames


def seed_article_users(world: World) -> dict[str, str]:
    """The seed article's pill at 18:00 + 5 min in four zones; returns user -> reminder id."""
    m = world.manager()
    out = {}
    for uid, tz in [
        ("tash", "Asia/Tashkent"),
        ("berlin", "Europe/Berlin"),
        ("ny", "America/New_York"),
        ("kath", "Asia/Kathmandu"),
    ]:
        world.user(uid, tz, manager=m)
        r = m.add_reminder(
            uid,
            category="medication",
            label="Citramon",
            at="18:00",
            offset_minutes=5,
            title="Citramon",
            body="Time to take it",
        )
        out[uid] = r["_id"]
    return out


def test_users_in_four_zones_get_the_right_scheduled_at(world: World) -> None:
    seed_article_users(world)
    planner = world.planner(clock=fixed_clock)
    report = planner.run_pass()
    assert report.inserted == 4
    got = {d["userId"]: d["scheduledAt"] for d in world.db[dbm.MESSAGES].find()}
    assert got == {
        "tash": dt.datetime(2026, 10, 24, 13, 5, tzinfo=dt.UTC),
        "berlin": dt.datetime(2026, 10, 24, 16, 5, tzinfo=dt.UTC),
        "ny": dt.datetime(2026, 10, 24, 22, 5, tzinfo=dt.UTC),
        "kath": dt.datetime(2026, 10, 24, 12, 20, tzinfo=dt.UTC),
    }
    for d in world.db[dbm.MESSAGES].find():
        assert d["status"] == "pending" and d["category"] == "medication"


def test_wakeups_arrive_on_the_category_queue_just_before_due(world: World) -> None:
    m = world.manager()
    world.user("u1", "Asia/Tashkent", manager=m)
    now = dt.datetime.now(dt.UTC)
    local = (now + dt.timedelta(minutes=2)).astimezone(
        __import__("zoneinfo").ZoneInfo("Asia/Tashkent")
    )
    m.add_reminder("u1", category="mood", label="check-in", at=local.strftime("%H:%M"))
    planner = world.planner()
    # A lead that makes the wake-up fire about 4 s from now, so the test does not wait minutes.
    msg = None
    planner.settings = planner.settings.model_copy(
        update={"wakeup": planner.settings.wakeup.model_copy(update={"lead_seconds": 0})}
    )
    report = planner.run_pass()
    assert report.inserted == 1
    msg = world.db[dbm.MESSAGES].find_one()
    assert msg is not None
    due = msg["scheduledAt"]
    lead = (due - dt.datetime.now(dt.UTC)).total_seconds() - 4
    planner.settings = planner.settings.model_copy(
        update={"wakeup": planner.settings.wakeup.model_copy(update={"lead_seconds": lead})}
    )
    armed_at = dt.datetime.now(dt.UTC)
    planner.arm([msg])
    frames = drain(world, "mood", 1)
    arrived = dt.datetime.now(dt.UTC)
    assert [decode(f.body).items[0].id for f in frames] == [msg["_id"]]
    assert frames[0].destination == world.settings.queue("mood")
    fire_at = due - dt.timedelta(seconds=lead)
    assert arrived >= fire_at - dt.timedelta(milliseconds=50)
    assert arrived - armed_at < dt.timedelta(seconds=15)
    assert decode(frames[0].body).items[0].due_ms == int(due.timestamp() * 1000)


def test_running_the_pass_twice_creates_nothing_new(world: World) -> None:
    seed_article_users(world)
    first = world.planner(clock=fixed_clock).run_pass()
    # Forget the watermark so the second pass re-plans the very same window.
    world.db[dbm.STATE].delete_many({})
    world.db[dbm.PARTITIONS].delete_many({})
    second = world.planner(clock=fixed_clock).run_pass()
    assert first.inserted == 4
    assert second.inserted == 0 and second.existing == 4
    assert world.db[dbm.MESSAGES].count_documents({}) == 4


def test_two_concurrent_passes_leave_one_message_per_occurrence_and_token(world: World) -> None:
    m = world.manager()
    for i in range(40):
        world.user(
            f"c{i}", ["Asia/Tashkent", "Europe/Berlin", "UTC", "Australia/Sydney"][i % 4], manager=m
        )
        m.add_reminder(f"c{i}", category="meal", label="lunch", at="12:30")
        m.add_reminder(f"c{i}", category="mood", label="evening", at="20:00")
    planners = [world.planner(clock=fixed_clock) for _ in range(2)]
    barrier = threading.Barrier(2)
    reports = []

    def run(p: Planner) -> None:
        barrier.wait()
        reports.append(p.run_pass())

    threads = [threading.Thread(target=run, args=(p,)) for p in planners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(reports) == 2
    keys = Counter(
        (d["reminderId"], d["notificationTokenId"], d["localDate"])
        for d in world.db[dbm.MESSAGES].find()
    )
    assert len(keys) == 80  # 40 users x 2 reminders x 1 token, one local day in 24 h
    assert set(keys.values()) == {1}
    assert sum(r.inserted for r in reports) == 80


class Crash(Exception):
    pass


class CrashingPlanner(Planner):
    """A pass killed between its inserts and its arming."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.wakeups.send = self._send_wakeups  # type: ignore[method-assign]

    def _send_wakeups(self, wakeups, progress):  # type: ignore[no-untyped-def]
        if wakeups:
            raise Crash("killed between insert and arm")
        return []


def fire_at_once(planner: Planner) -> None:
    """Make every wake-up this planner arms fire at once, so a test can count them."""
    planner.settings = planner.settings.model_copy(
        update={"wakeup": planner.settings.wakeup.model_copy(update={"lead_seconds": 10**7})}
    )


def test_a_reminder_changed_after_a_pass_died_is_planned_anew_and_its_old_message_cancelled(
    world: World,
) -> None:
    """A pass dies between its inserts and its arming (no watermark yet); the reminder's text is
    then changed. The change must cancel what the dead pass inserted for the old version (with
    its reason), and the next pass must plan and arm the new version: the old message would
    otherwise hold the occurrence's slot in the unique index, unarmed, until the janitor."""
    reminders = seed_article_users(world)

    with pytest.raises(Crash):
        CrashingPlanner(world.db, world.broker(), world.settings).run_pass()
    old = world.db[dbm.MESSAGES].find_one({"userId": "berlin"})
    assert old is not None and old["status"] == "pending"

    world.manager().update_reminder(reminders["berlin"], title="Citramon, 1 tablet")
    # Planned at once, up to the end of the window in progress as the cancel went (the same
    # holds while a pass is still running, but for one ordering: docs/architecture.md).
    early = world.db[dbm.MESSAGES].find_one(
        {"userId": "berlin", "status": "pending", "scheduledAt": old["scheduledAt"]}
    )
    assert early is not None and early["title"] == "Citramon, 1 tablet"

    planner = world.planner()
    fire_at_once(planner)
    planner.run_pass()
    again = world.db[dbm.MESSAGES].find_one({"_id": old["_id"]})
    assert again is not None and again["status"] == "cancelled", again
    assert again["reason"] == "reminder changed"
    new = world.db[dbm.MESSAGES].find_one(
        {"userId": "berlin", "status": "pending", "scheduledAt": old["scheduledAt"]}
    )
    assert new is not None and new["_id"] != old["_id"] and new["title"] == "Citramon, 1 tablet"
    armed = {i.id for f in drain(world, "medication", 1) for i in decode(f.body).items}
    assert new["_id"] in armed


# Kathmandu's 18:05 is 12:20 UTC on the fixed day: 30 s after it, within grace, that message
# is overdue and must still be armed (sent late), though the next pass's "now" is past it.
KATHMANDU_DUE = dt.datetime(2026, 10, 24, 12, 20, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "resumed_at",
    [FIXED_NOW, KATHMANDU_DUE + dt.timedelta(seconds=30)],
    ids=["at-once", "after-a-message-fell-due"],
)
def test_a_pass_killed_between_write_and_arm_is_armed_by_the_next(
    world: World, resumed_at: dt.datetime
) -> None:
    seed_article_users(world)

    crashing = CrashingPlanner(world.db, world.broker(), world.settings, clock=fixed_clock)
    with pytest.raises(Crash):
        crashing.run_pass()
    assert world.db[dbm.MESSAGES].count_documents({"status": "pending"}) == 4
    states = list(world.db[dbm.PARTITIONS].find())
    assert states and all("inProgress" in st and st["plannedUntil"] is None for st in states)

    # Make every wake-up fire at once so the test can count them on the queue.
    crashed = {d["_id"] for d in world.db[dbm.MESSAGES].find()}
    planner = world.planner(clock=lambda: resumed_at)
    fire_at_once(planner)
    report = planner.run_pass()
    # Planned again from the crashed window's start: what it inserted is found, armed as found.
    assert report.existing == 4
    frames = drain(world, "medication", 1)
    armed = Counter(i.id for f in frames for i in decode(f.body).items)
    ids = {d["_id"] for d in world.db[dbm.MESSAGES].find()}
    assert crashed <= ids and set(armed) == ids
    assert set(armed.values()) == {1}
    kathmandu = world.db[dbm.MESSAGES].find_one({"userId": "kath", "scheduledAt": KATHMANDU_DUE})
    assert kathmandu is not None and kathmandu["_id"] in armed
    states = list(world.db[dbm.PARTITIONS].find())
    assert states and not any("inProgress" in st for st in states)


def test_a_dead_passs_message_for_a_device_logged_out_since_ends_cancelled_not_missed(
    world: World,
) -> None:
    """A pass dies between its inserts and its arming; a user then logs out of the device. The
    next pass plans the window again from current documents: nothing for that registration,
    so nothing arms what the dead pass inserted for it, and it ended ``is_missed`` past grace
    (never sent, but counted as a miss an operator replays). A registration once deactivated
    never comes back (a new login is a new one, with new message ids): it ends ``cancelled``
    with the consumer's reason."""
    from creator.accounts import logout

    seed_article_users(world)
    with pytest.raises(Crash):
        CrashingPlanner(world.db, world.broker(), world.settings, clock=fixed_clock).run_pass()
    logout(world.manager(), "berlin", "dev-berlin")
    # And a registration written by hand with an id that is not text: a bad document the
    # planner reports, never a sweep that stops (sorting it among the others raised).
    world.db[dbm.TOKENS].insert_one({"_id": 7, "userId": "tash", "isActive": False})
    planner = world.planner(clock=lambda: FIXED_NOW + dt.timedelta(minutes=1))
    fire_at_once(planner)
    planner.run_pass()

    msgs = {d["userId"]: d for d in world.db[dbm.MESSAGES].find()}
    assert (msgs["berlin"]["status"], msgs["berlin"]["reason"]) == (
        "cancelled",
        "token no longer active (unregistered (logout))",
    )
    assert {u: d["status"] for u, d in msgs.items() if u != "berlin"} == dict.fromkeys(
        ("tash", "ny", "kath"), "pending"
    )
    armed = {i.id for f in drain(world, "medication", 3) for i in decode(f.body).items}
    assert armed == {d["_id"] for u, d in msgs.items() if u != "berlin"}


def test_a_reminder_written_without_a_version_keeps_its_occurrence_when_changed(
    world: World,
) -> None:
    """A reminder written around the management code may have no ``version`` (read as 1
    everywhere). A change bumped it with ``$inc``, which makes a missing field 1: the new
    version's messages had the old ones' ids, found them cancelled, and nothing was sent."""
    rids = seed_article_users(world)
    world.db[dbm.REMINDERS].update_one({"_id": rids["berlin"]}, {"$unset": {"version": ""}})
    world.planner(clock=fixed_clock).run_pass()
    m = world.manager()
    m.planner.clock = fixed_clock
    m.update_reminder(rids["berlin"], title="Citramon, 1 tablet")
    msgs = list(world.db[dbm.MESSAGES].find({"userId": "berlin"}))
    assert sorted((d.get("reminderVersion"), d["status"]) for d in msgs) == [
        (1, "cancelled"),
        (2, "pending"),
    ]


@pytest.mark.parametrize("second", ["update", "put", "patch"])
def test_two_changes_of_one_reminder_at_once_keep_both_and_its_occurrence(
    world: World, monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    """Two changes of the same reminder at once, the second having read it before the first
    wrote it. The second wrote its whole content over the first's (the first's field was lost)
    and cancelled only the version it had read: the first's new message kept the occurrence's
    slot, the unique index refused the second's, and the consumer cancels the first's at send
    ("reminder changed"): nothing was sent. The second must see the first's version and start
    again from it. Driven through the CLI's change (``update_reminder``), the API's PUT
    (``put_reminder``) and its PATCH (``ApiManager.patch_reminder``)."""
    from api.manage import ApiManager
    from creator import upserts
    from creator.writers import reminders as reminder_writer

    rids = seed_article_users(world)
    world.planner(clock=fixed_clock).run_pass()
    first, later = world.manager(), world.manager()
    first.planner.clock = later.planner.clock = fixed_clock
    rid = rids["berlin"]
    done: list[Doc] = []

    def first_changes_it(real: Any) -> Any:
        def step(*a: Any, **kw: Any) -> Any:
            if not done:  # once: between the second's read of the reminder and its write
                done.append(first.update_reminder(rid, body="With water"))
            return real(*a, **kw)

        return step

    if second == "update":
        monkeypatch.setattr(later, "get_user", first_changes_it(later.get_user))
        later.update_reminder(rid, title="Citramon, 1 tablet")
    elif second == "put":
        check = first_changes_it(reminder_writer._check_owner)
        monkeypatch.setattr(reminder_writer, "_check_owner", check)
        spec = upserts.ReminderSpec(
            "medication", "Citramon", "18:00", offset_minutes=5, title="Citramon, 1 tablet"
        )
        upserts.put_reminder(later, "berlin", rid, spec)
    else:
        api = ApiManager(later.db, later.planner, later.settings)
        check = first_changes_it(reminder_writer._check_owner)
        monkeypatch.setattr(reminder_writer, "_check_owner", check)
        api.patch_reminder("berlin", rid, {"title": "Citramon, 1 tablet"})
    assert done, "the first change did not run in between"

    stored = world.db[dbm.REMINDERS].find_one({"_id": rid})
    assert stored is not None and stored["version"] == 3
    msgs = list(world.db[dbm.MESSAGES].find({"userId": "berlin"}))
    pending = [d for d in msgs if d["status"] == "pending"]
    assert [d["reminderVersion"] for d in pending] == [3], sorted(
        (d["reminderVersion"], d["status"]) for d in msgs
    )
    assert sorted(d["reminderVersion"] for d in msgs if d["status"] == "cancelled") == [1, 2]
    assert pending[0]["title"] == "Citramon, 1 tablet"
    if second != "put":  # a change names its own fields: the first's body stays
        assert stored["body"] == pending[0]["body"] == "With water"
    else:  # a PUT replaces the whole reminder
        assert stored.get("body") is None and pending[0].get("body") in (None, "")


def test_a_change_racing_a_zone_change_keeps_the_occurrence(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reminder change reads the reminder and the user (zone Berlin); the user's zone then
    changes to Tokyo in full (the reminder's version 2 planned at the Tokyo instant); the change
    starts over from version 2, but cancelled at the instants of the zone it had read: the
    version 2 message at the Tokyo instant kept the slot, the unique index refused version 3's,
    and the consumer cancels version 2's at send: nothing sent. The cancel must cover the zone
    as stored too."""
    rids = seed_article_users(world)
    world.planner(clock=fixed_clock).run_pass()
    zone, later = world.manager(), world.manager()
    zone.planner.clock = later.planner.clock = fixed_clock
    rid = rids["berlin"]
    real = later.get_user
    moved: list[Doc] = []

    def read_then_the_zone_moves(*a: Any, **kw: Any) -> Any:
        user = real(*a, **kw)  # read before the zone change: Berlin
        if not moved:
            moved.append(zone.upsert_user("berlin", timezone="Asia/Tokyo"))
        return user

    monkeypatch.setattr(later, "get_user", read_then_the_zone_moves)
    later.update_reminder(rid, title="Citramon, 1 tablet")
    assert moved
    msgs = list(world.db[dbm.MESSAGES].find({"userId": "berlin"}))
    pending = [d for d in msgs if d["status"] == "pending"]
    assert [(d["reminderVersion"], d["timezone"]) for d in pending] == [(3, "Asia/Tokyo")], sorted(
        (d["reminderVersion"], d["status"], d["timezone"]) for d in msgs
    )


def test_a_patch_racing_a_delete_or_an_erasure_is_a_404_and_brings_nothing_back(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PATCH (or PUT) that read a reminder before a DELETE of it, or an erasure of its user,
    starts over from what is there then: a removed reminder is not revived by a PATCH, nor an
    erased user's reminder written again (with its text) by either; a PUT creating a reminder
    for a user erased meanwhile leaves none."""
    from api.manage import ApiManager
    from creator import upserts
    from creator.accounts import erase_user
    from creator.writers import reminders as reminder_writer
    from shared.errors import NotFoundError

    rids = seed_article_users(world)
    world.planner(clock=fixed_clock).run_pass()
    other = world.manager()
    api = ApiManager(world.db, world.manager().planner, world.settings)
    real = reminder_writer._check_owner
    step: list[str] = []

    def before_the_write(action: Any) -> Any:
        def check(*a: Any) -> Any:
            if not step:
                step.append("ran")
                action()
            return real(*a)

        return check

    rid = rids["berlin"]
    monkeypatch.setattr(
        reminder_writer, "_check_owner", before_the_write(lambda: other.remove_reminder(rid))
    )
    with pytest.raises(NotFoundError):
        api.patch_reminder("berlin", rid, {"title": "Citramon, 1 tablet"})
    stored = world.db[dbm.REMINDERS].find_one({"_id": rid})
    assert stored is not None and stored["isDeleted"] and stored["title"] == "Citramon"

    step.clear()
    rid = rids["tash"]
    monkeypatch.setattr(
        reminder_writer, "_check_owner", before_the_write(lambda: erase_user(other, "tash"))
    )
    spec = upserts.ReminderSpec("medication", "Citramon", "18:00", title="Citramon, 1 tablet")
    with pytest.raises(NotFoundError):
        upserts.put_reminder(api, "tash", rid, spec)
    assert world.db[dbm.REMINDERS].count_documents({"userId": "tash"}) == 0
    assert world.db[dbm.USERS].count_documents({"_id": "tash"}) == 0

    # A PUT creating a reminder, its user erased between its read of the user and its insert.
    real_new = reminder_writer.new_reminder

    def erased_first(*a: Any) -> Any:
        erase_user(other, "ny")
        return real_new(*a)

    monkeypatch.setattr(reminder_writer, "new_reminder", erased_first)
    with pytest.raises(NotFoundError):
        upserts.put_reminder(api, "ny", "ny-new", spec)
    assert world.db[dbm.REMINDERS].count_documents({"_id": "ny-new"}) == 0


def test_a_change_that_keeps_losing_the_race_gives_up_with_a_conflict(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another change getting in first every time: the change stops after SUPERSEDE_TRIES reads,
    with a ConflictError (a 409 at the API) naming the reminder, and has written nothing."""
    from creator import manage
    from shared.errors import ConflictError

    rids = seed_article_users(world)
    m = world.manager()
    rid = rids["berlin"]
    before = world.db[dbm.REMINDERS].find_one({"_id": rid})
    real = m.versions.supersede
    tries: list[int] = []

    def another_change_first(old: Doc, *a: Any, **kw: Any) -> bool:
        tries.append(1)
        world.db[dbm.REMINDERS].update_one({"_id": rid}, {"$inc": {"version": 1}})
        return real(old, *a, **kw)

    monkeypatch.setattr(m.versions, "supersede", another_change_first)
    with pytest.raises(ConflictError, match=rid):
        m.update_reminder(rid, title="never")
    assert len(tries) == manage.SUPERSEDE_TRIES
    after = world.db[dbm.REMINDERS].find_one({"_id": rid})
    assert after is not None and before is not None
    assert after["title"] == before["title"]
    assert after["version"] == before["version"] + manage.SUPERSEDE_TRIES


def test_removing_a_reminder_after_planning_cancels_its_pending_message(world: World) -> None:
    rids = seed_article_users(world)
    world.planner(clock=fixed_clock).run_pass()
    m = world.manager()
    m.planner.clock = fixed_clock
    m.remove_reminder(rids["berlin"])
    msg = world.db[dbm.MESSAGES].find_one({"userId": "berlin"})
    assert msg is not None
    assert msg["status"] == "cancelled" and msg["reason"] == "reminder removed"
    others = world.db[dbm.MESSAGES].count_documents({"status": "pending"})
    assert others == 3


def test_changing_the_zone_moves_pending_messages_to_the_new_instant(world: World) -> None:
    seed_article_users(world)
    world.planner(clock=fixed_clock).run_pass()
    m = world.manager()
    m.planner.clock = fixed_clock
    m.upsert_user("tash", timezone="Europe/Berlin")
    msgs = list(world.db[dbm.MESSAGES].find({"userId": "tash"}).sort("scheduledAt", 1))
    old = [d for d in msgs if d["scheduledAt"] == dt.datetime(2026, 10, 24, 13, 5, tzinfo=dt.UTC)]
    new = [d for d in msgs if d["status"] == "pending"]
    assert len(old) == 1 and old[0]["status"] == "cancelled"
    assert "time zone changed" in old[0]["reason"]
    assert [d["scheduledAt"] for d in new] == [dt.datetime(2026, 10, 24, 16, 5, tzinfo=dt.UTC)]


def test_removed_reminder_is_never_sent_at_the_old_instant(world: World) -> None:
    """End to end: planned, then removed, then the consumer runs at the due instant."""
    world.user("late", "UTC")
    due = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=4)).replace(microsecond=0)
    docs = world.due_messages(["late"], due)
    m = world.manager()
    m.remove_reminder(docs[0]["reminderId"])
    rc = world.start_consumer()
    wait_for(lambda: world.all_terminal([docs[0]["_id"]]), 30, what="terminal")
    rc.stop()
    assert world.fake.pushes() == []
    assert world.message(docs[0]["_id"])["status"] == "cancelled"


def test_concurrent_logins_leave_exactly_one_active_token(world: World) -> None:
    m = world.manager()
    m.upsert_user("racer", timezone="UTC")
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def login(i: int) -> None:
        mm = world.manager()
        barrier.wait()
        try:
            mm.register_token("racer", device="phone-1", token=f"ExponentPushToken[race-{i}]")
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=login, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    active = list(world.db[dbm.TOKENS].find({"deviceId": "phone-1", "isActive": True}))
    assert len(active) == 1
    assert world.db[dbm.TOKENS].count_documents({"deviceId": "phone-1"}) == 8
    for t in world.db[dbm.TOKENS].find({"deviceId": "phone-1", "isActive": False}):
        assert t["deactivationReason"] == "token replaced by a new login on the install"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"at": "25:00"}, "25:00"),
        ({"at": "7pm"}, "7pm"),
        ({"category": "snacks"}, "unknown category 'snacks'"),
        ({"body": "x" * 5000}, "4096"),
        ({"weekdays": "mon,funday"}, "funday"),
        ({"offset_minutes": 2000}, "2000"),
    ],
)
def test_bad_reminder_input_is_refused_with_a_message_naming_it(
    world: World, kwargs: dict[str, object], fragment: str
) -> None:
    m = world.manager()
    m.upsert_user("v", timezone="UTC")
    args: dict[str, object] = {"category": "meal", "label": "lunch", "at": "12:30"} | kwargs
    with pytest.raises(InputError) as exc:
        m.add_reminder("v", **args)  # type: ignore[arg-type]
    assert fragment in str(exc.value)


def test_bad_zone_and_token_are_refused(world: World) -> None:
    m = world.manager()
    with pytest.raises(InputError, match="Europe/Berln"):
        m.upsert_user("z", timezone="Europe/Berln")
    m.upsert_user("z", timezone="Europe/Berlin")
    with pytest.raises(InputError, match="not-a-token"):
        m.register_token("z", device="d", token="not-a-token")


def test_a_skipped_pass_still_accounts_for_every_occurrence(world: World) -> None:
    """Creator down longer than the horizon: the gap is planned on resume, then ends honestly."""
    m = world.manager()
    world.user("gap", "UTC", manager=m)
    m.add_reminder("gap", category="meal", label="breakfast", at="03:00")
    short = world.settings.model_copy(
        update={"creator": world.settings.creator.model_copy(update={"horizon_hours": 1.0})}
    )
    first = Planner(world.db, world.broker(), short, clock=fixed_clock)
    assert first.run_pass().inserted == 0  # 00:00..01:00 holds no 03:00
    later = Planner(
        world.db, world.broker(), short, clock=lambda: FIXED_NOW + dt.timedelta(hours=6)
    )
    report = later.run_pass()
    assert report.inserted == 1
    assert any("catching up" in n for n in report.notes)
    msg = world.db[dbm.MESSAGES].find_one({"userId": "gap"})
    assert msg is not None and msg["scheduledAt"] == FIXED_NOW + dt.timedelta(hours=3)
    # Hours past its grace window: the same pass's janitor ends it, saying why.
    done = world.message(msg["_id"])
    assert done["status"] == "is_missed"
    assert "creator down" in done["reason"] and "grace 900 s" in done["reason"]
    # The wake-up armed for it is harmless: the consumer finds it no longer pending.
    rc = world.start_consumer(burst=True)
    rc.join(60)
    assert world.fake.pushes() == []
    assert world.message(msg["_id"])["status"] == "is_missed"


def test_a_pass_over_unchanged_data_writes_nothing_and_reads_no_reminders(
    world: World, stack: object
) -> None:
    from pymongo import monitoring

    seed_article_users(world)
    world.planner(clock=fixed_clock).run_pass()

    class Recorder(monitoring.CommandListener):
        def __init__(self) -> None:
            self.commands: list[tuple[str, str]] = []
            self.filters: list[tuple[str, Any]] = []

        def started(self, event: monitoring.CommandStartedEvent) -> None:
            coll = event.command.get(event.command_name)
            self.commands.append((event.command_name, str(coll)))
            if event.command_name == "find":
                self.filters.append((str(coll), event.command.get("filter")))

        def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
            pass

        def failed(self, event: monitoring.CommandFailedEvent) -> None:
            pass

    rec = Recorder()
    client = stack.mongo_client(event_listeners=[rec])  # type: ignore[attr-defined]
    try:
        db = client[world.settings.mongo.database]
        later = Planner(
            db, world.broker(), world.settings, clock=lambda: FIXED_NOW + dt.timedelta(minutes=10)
        )
        report = later.run_pass()
    finally:
        client.close()
    assert report.window_start is None and report.inserted == 0
    # Writes: only the creator's heartbeat and its leases (constant, whatever the data).
    writes = {coll for c, coll in rec.commands if c in ("insert", "update", "delete")}
    assert writes <= {dbm.CREATORS, dbm.PARTITIONS}, rec.commands
    # Users, reminders and tokens: only the index lookup of documents without a bucket.
    for coll, flt in rec.filters:
        if coll in (dbm.REMINDERS, dbm.USERS, dbm.TOKENS):
            assert flt == {"bucket": None}, (coll, flt)
    finds = [coll for coll, _ in rec.filters if coll not in (dbm.REMINDERS, dbm.USERS, dbm.TOKENS)]
    # Partitions and live creators, orphaned send-journal entries, the janitor's (empty) due
    # range: each bounded by the partitions, the creators, or what is due or orphaned.
    assert finds == [
        dbm.PARTITIONS,
        dbm.CREATORS,
        dbm.PARTITIONS,
        dbm.PARTITIONS,
        dbm.JOURNAL,
        dbm.MESSAGES,
    ], rec.commands


def test_a_pass_streams_chunks_of_users_and_arms_the_wakeups_of_one_global_grouping(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass reads a few users at a time (bucket ranges), inserts each chunk before it
    arms anything, and arms exactly the wake-ups of grouping the whole window at once: every
    planned message in exactly one wake-up, none part-full because of the chunks."""
    import creator.partition_pass as planner_mod
    from shared.domain.plan import group_wakeups

    m = world.manager()
    zones = ["Asia/Tashkent", "Europe/Berlin", "America/New_York", "Australia/Sydney", "UTC"]
    for n in range(30):
        world.user(f"u{n}", zones[n % len(zones)], manager=m)
        for k, cat in enumerate(["meal", "mood", "medication"]):
            m.add_reminder(f"u{n}", category=cat, label=f"{cat}-{n}", at=f"{7 + k:02d}:00")
    monkeypatch.setattr(planner_mod, "CHUNK_REMINDERS", 10)
    monkeypatch.setattr(planner_mod, "INSERT_CHUNK", 7)
    planner = world.planner(clock=fixed_clock)
    events: list[tuple[str, int]] = []
    chunks: list[tuple[int, int]] = []
    wakeups: list[WakeUp] = []
    insert, send, read = planner.inserter.insert, planner.wakeups.send, planner.passes.read_chunk

    def spy_read(lo: int, hi: int) -> Any:
        chunks.append((lo, hi))
        return read(lo, hi)

    def spy_insert(docs: list[Doc], report: PassReport, *rest: Any) -> list[Doc]:
        events.append(("insert", len(docs)))
        return insert(docs, report, *rest)

    def spy_send(ws: list[WakeUp], progress: Any) -> list[WakeUp]:
        events.append(("arm", len(ws)))
        wakeups.extend(ws)
        return send(ws, progress)

    monkeypatch.setattr(planner.passes, "read_chunk", spy_read)
    monkeypatch.setattr(planner.inserter, "insert", spy_insert)
    monkeypatch.setattr(planner.wakeups, "send", spy_send)
    report = planner.run_pass()

    assert report.planned == report.inserted == 90
    assert len(chunks) > 4  # read a few users at a time, not all at once
    assert all(n <= 7 for kind, n in events if kind == "insert")
    last_insert = max(i for i, (kind, _) in enumerate(events) if kind == "insert")
    assert all(i > last_insert for i, (kind, _) in enumerate(events) if kind == "arm")
    docs = list(world.db[dbm.MESSAGES].find())
    c = world.settings.creator
    whole = group_wakeups(
        docs,
        size=c.wakeup_size,
        window_s=world.settings.wakeup.window_seconds,
        planned_at=FIXED_NOW,
    )
    assert [(w.id, w.items) for w in wakeups] == [(w.id, w.items) for w in whole]
    assert report.wakeups == len(whole)


@pytest.mark.parametrize(
    "inserted_at", ["between-the-bump-and-the-cancel", "after-the-cancel", "before-the-plan"]
)
def test_a_reminder_changed_while_a_pass_holds_its_old_version_keeps_its_occurrence(
    world: World, monkeypatch: pytest.MonkeyPatch, inserted_at: str
) -> None:
    """The one ordering that lost an occurrence: a pass reads a reminder; the reminder is
    changed (the change cancels its old messages: the pass has inserted none yet); the pass
    inserts the old version; only then does the change plan the new one, which the unique index
    refuses, the old one holding the occurrence's slot; the consumer then cancels the old one at
    send ("reminder changed") and nothing is sent. The pass must see the change after its
    insert, end what it inserted of the old version and plan the new one. The pass inserts
    right after the change's cancel (before the change has stamped the change log for the
    consumers), or just before the change plans; or between the change's new version and its
    cancel, so that the pass plans the new version before the change cancels: the cancel must
    leave the new version be."""
    reminders = seed_article_users(world)
    # Seeded long ago: the change log holds none of them (it keeps a change for a while).
    world.db[dbm.CHANGES].delete_many({})
    read, go, inserted = threading.Event(), threading.Event(), threading.Event()
    real_read, real_insert = PartitionPass.read_chunk, PartitionPass.insert_piece

    def read_then_wait(self: PartitionPass, lo: int, hi: int) -> Any:
        out = real_read(self, lo, hi)
        read.set()
        assert go.wait(20)
        return out

    def insert_then_tell(self: PartitionPass, *a: Any) -> Any:
        try:
            return real_insert(self, *a)
        finally:
            inserted.set()

    monkeypatch.setattr(PartitionPass, "read_chunk", read_then_wait)
    monkeypatch.setattr(PartitionPass, "insert_piece", insert_then_tell)
    m = world.manager()

    def then_let_the_pass_insert(real: Any) -> Any:
        def step(*a: Any, **kw: Any) -> Any:
            out = real(*a, **kw)
            go.set()
            assert inserted.wait(20)
            return out

        return step

    def let_the_pass_insert_then(real: Any) -> Any:
        def step(*a: Any, **kw: Any) -> Any:
            go.set()
            assert inserted.wait(20)
            return real(*a, **kw)

        return step

    if inserted_at == "between-the-bump-and-the-cancel":  # the writer reads the watermark
        parts = m.planner.stores.partitions
        monkeypatch.setattr(parts, "watermarks", let_the_pass_insert_then(parts.watermarks))
    elif inserted_at == "after-the-cancel":
        monkeypatch.setattr(m.versions, "supersede", then_let_the_pass_insert(m.versions.supersede))
    else:
        monkeypatch.setattr(m.planner, "plan_users", let_the_pass_insert_then(m.planner.plan_users))
    planner = world.planner()
    fire_at_once(planner)
    fire_at_once(m.planner)
    reports: list[PassReport] = []
    passing = threading.Thread(target=lambda: reports.append(planner.run_pass()))
    passing.start()
    assert read.wait(20)
    m.update_reminder(reminders["berlin"], title="Citramon, 1 tablet")
    passing.join(60)
    assert reports, "the pass did not finish"

    msgs = list(world.db[dbm.MESSAGES].find({"userId": "berlin"}))
    assert {(d["reminderVersion"], d["status"]) for d in msgs} == {(1, "cancelled"), (2, "pending")}
    old = sorted(d["scheduledAt"] for d in msgs if d["reminderVersion"] == 1)
    new = [d for d in msgs if d["reminderVersion"] == 2]
    assert sorted(d["scheduledAt"] for d in new) == old
    assert {d["title"] for d in new} == {"Citramon, 1 tablet"}
    armed = {i.id for f in drain(world, "medication", 4) for i in decode(f.body).items}
    assert {d["_id"] for d in new} <= armed
    assert not {d["_id"] for d in msgs if d["reminderVersion"] == 1} & armed


def test_a_change_made_while_the_broker_is_away_is_armed_by_the_next_pass(world: World) -> None:
    """Found by an audit of the API: a reminder added while the broker was unreachable was
    stored with its message planned, the change answered 503, and nothing ever armed that
    message: a running creator's passes plan new slices only, so it stayed pending past its due
    instant and ended is_missed. Now the change is stored and answered, its partition's window
    is marked to be planned again, and the next pass arms what the change planned."""
    from creator.manage import Manager

    m = world.manager()
    world.planner().run_pass()  # a planned window: a change plans at once
    world.user("away", tz="UTC", manager=m)
    away = world.settings.model_copy(
        update={"stomp": world.settings.stomp.model_copy(update={"port": _closed_port()})}
    )
    cut_off = Manager(
        world.db, Planner(world.db, StompClient(away), world.settings), world.settings
    )
    due = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=3)).strftime("%H:%M")
    cut_off.add_reminder("away", category="meal", label="lunch", at=due)
    [planned] = list(world.db[dbm.MESSAGES].find({"userId": "away"}))
    assert planned["status"] == "pending"
    planner = world.planner()
    fire_at_once(planner)
    planner.run_pass()
    frames = drain(world, "meal", 1)
    armed = {i.id for f in frames for i in decode(f.body).items}
    assert planned["_id"] in armed


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
