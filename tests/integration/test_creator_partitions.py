"""Several creators on the same data: each user's reminders planned by exactly one creator, a
dead creator's partitions taken over and finished by the others, the janitor run once."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections import Counter
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pymongo.errors import OperationFailure

from creator.planner import PassReport, Planner
from shared.domain.messages import Status, new_message
from shared.domain.plan import bucket_of, partition_of
from shared.store import db as dbm
from shared.store.mongo import creator_stores
from shared.store.partitions import LEGACY_ID, Membership
from shared.wire import WakeUp
from tests.integration.harness import MessageReads, World

NOW = dt.datetime(2026, 10, 24, 0, 0, tzinfo=dt.UTC)
ZONES = ["Asia/Tashkent", "Europe/Berlin", "America/New_York", "Australia/Sydney", "UTC"]


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> dt.datetime:
        return self.now


def seed(world: World, users: int = 40) -> int:
    """Users with a token and two reminders each; returns the occurrences of the first day."""
    m = world.manager()
    for n in range(users):
        world.user(f"p{n}", ZONES[n % len(ZONES)], manager=m)
        m.add_reminder(f"p{n}", category="meal", label="lunch", at="12:30")
        m.add_reminder(f"p{n}", category="mood", label="evening", at="20:00")
    return users * 2


def occurrences(users: int, start: dt.datetime, end: dt.datetime) -> set[tuple[str, str, Any]]:
    """What ``seed`` should plan in ``[start, end)``: (user, label, UTC instant), by zoneinfo."""
    out = set()
    for n in range(users):
        tz = ZoneInfo(ZONES[n % len(ZONES)])
        for label, hh, mm in [("lunch", 12, 30), ("evening", 20, 0)]:
            for days in range(-1, 3):
                day = start.date() + dt.timedelta(days=days)
                at = dt.datetime(day.year, day.month, day.day, hh, mm, tzinfo=tz).astimezone(dt.UTC)
                if start <= at < end:
                    out.add((f"p{n}", label, at))
    return out


def creator(world: World, name: str, clock: Clock) -> tuple[Planner, list[WakeUp]]:
    """A creator as the service runs it (leases kept between passes), recording what it arms.

    The creators' registry expires heartbeats an hour old (a TTL index), and this module's clock
    is weeks behind the server's: the server's TTL sweep could delete a creator registered a
    moment ago, and the other then took every partition (seen once in CI). The index goes."""
    with contextlib.suppress(OperationFailure):
        world.db[dbm.CREATORS].drop_index("creators_by_heartbeat")
    s = world.settings
    parts = creator_stores(world.db).partitions
    membership = Membership(parts, s.creator.partitions, s.creator.lease_seconds, me=name)
    planner = Planner(world.db, world.broker(), s, clock=clock, membership=membership)
    planner.keep_leases = True
    armed: list[WakeUp] = []
    send = planner.wakeups.send

    def recording(ws: list[WakeUp], progress: Any) -> list[WakeUp]:
        armed.extend(ws)
        return send(ws, progress)

    planner.wakeups.send = recording  # type: ignore[method-assign]
    return planner, armed


def partition(uid: str, world: World) -> int:
    return partition_of(bucket_of(uid), world.settings.creator.partitions)


def test_two_creators_plan_each_occurrence_once_and_share_the_work(world: World) -> None:
    expected = seed(world)
    clock = Clock()
    (a, armed_a), (b, armed_b) = creator(world, "A", clock), creator(world, "B", clock)
    a.membership.register(NOW)  # both started: each sees the other before its first pass
    b.membership.register(NOW)
    ra, rb = a.run_pass(), b.run_pass()

    assert set(ra.partitions).isdisjoint(rb.partitions)
    assert set(ra.partitions) | set(rb.partitions) == set(range(world.settings.creator.partitions))
    # Each occurrence inserted by exactly one creator; neither re-planned the other's.
    assert ra.inserted > 0 and rb.inserted > 0
    assert ra.inserted + rb.inserted == expected
    assert ra.existing == rb.existing == 0
    msgs = list(world.db[dbm.MESSAGES].find())
    assert len(msgs) == expected
    for planner, report in ((a, ra), (b, rb)):
        mine = {m["_id"] for m in msgs if partition(m["userId"], world) in report.partitions}
        armed = armed_a if planner is a else armed_b
        assert {i.id for w in armed for i in w.items} == mine
    # Armed once each, by its partition's holder.
    named = Counter(i.id for w in armed_a + armed_b for i in w.items)
    assert set(named) == {m["_id"] for m in msgs} and set(named.values()) == {1}


def test_a_killed_creators_partitions_are_finished_by_the_other_within_one_lease(
    world: World, stack: Any
) -> None:
    expected = seed(world, users=60)
    clock = Clock()
    (a, armed_a), (b, armed_b) = creator(world, "A", clock), creator(world, "B", clock)
    a.membership.register(NOW)
    b.membership.register(NOW)

    class Killed(Exception):
        pass

    calls = 0
    insert = a.inserter.insert

    def dies_after_first_insert(docs: list[Any], report: PassReport, *rest: Any) -> list[Any]:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise Killed("kill -9 between two inserts")
        return insert(docs, report, *rest)

    import creator.partition_pass as planner_mod

    old_chunk = planner_mod.INSERT_CHUNK
    planner_mod.INSERT_CHUNK = 10  # several inserts per pass, so it dies in the middle
    try:
        a.inserter.insert = dies_after_first_insert  # type: ignore[method-assign]
        with pytest.raises(Killed):
            a.run_pass()
        rb = b.run_pass()  # A's leases still run: B plans its own share only
    finally:
        planner_mod.INSERT_CHUNK = old_chunk
    a_parts = set(range(world.settings.creator.partitions)) - set(rb.partitions)
    assert a_parts and not armed_a  # A died before arming anything
    states = {d["p"]: d for d in world.db[dbm.PARTITIONS].find()}
    assert all("inProgress" in states[p] and states[p]["owner"] == "A" for p in a_parts)
    inserted_by_a = world.db[dbm.MESSAGES].count_documents({}) - rb.inserted
    assert 0 < inserted_by_a < expected - rb.inserted

    # A never renews; past its lease (well within one interval) B takes its partitions,
    # re-arms what A inserted and plans the rest.
    clock.now = NOW + dt.timedelta(seconds=world.settings.creator.lease_seconds + 1)
    assert world.settings.creator.lease_seconds < world.settings.creator.interval_seconds
    armed_b.clear()
    reads: list[tuple[str, int]] = []
    b.db = stack.mongo_client(event_listeners=[MessageReads(reads)])[world.db.name]
    takeover = b.run_pass()
    assert set(takeover.partitions) == set(range(world.settings.creator.partitions))
    assert set(takeover.planned_partitions) == a_parts  # B's own are planned already
    assert takeover.existing == inserted_by_a  # found by the re-plan, armed as found
    # The takeover reads at most what A inserted: none of B's own partitions' messages. It
    # used to re-arm A's window from every pending message in it, sorted by due instant, and
    # at 1M that read passed the driver's 30 s timeout (bench scale, the kill step).
    assert sum(n for _, n in reads) <= inserted_by_a, reads

    msgs = list(world.db[dbm.MESSAGES].find())
    # 0 lost, 0 duplicates: one document per occurrence of each partition's planned window (A's
    # planned again from its interrupted window's start, up to the takeover's horizon).
    assert rb.window_end is not None and takeover.window_end is not None
    want = {
        k
        for k in occurrences(60, NOW, takeover.window_end)
        if k[2] < (takeover.window_end if partition(k[0], world) in a_parts else rb.window_end)
    }
    got = Counter((m["userId"], m["label"], m["scheduledAt"]) for m in msgs)
    assert set(got) == want and set(got.values()) == {1}
    assert takeover.inserted == len(want) - rb.inserted - inserted_by_a
    assert all(m["status"] == Status.PENDING.value for m in msgs)
    a_ids = {m["_id"] for m in msgs if partition(m["userId"], world) in a_parts}
    named = Counter(i.id for w in armed_b for i in w.items)
    # Every message of A's partitions armed once, and none of B's own armed again.
    assert set(named) == a_ids and set(named.values()) == {1}
    states = {d["p"]: d for d in world.db[dbm.PARTITIONS].find()}
    assert all("inProgress" not in d and d["owner"] == "B" for d in states.values())


def test_the_janitor_runs_once_per_pass_for_the_fleet_by_partition_zeros_holder(
    world: World,
) -> None:
    seed(world, users=4)
    clock = Clock()
    (a, _), (b, _) = creator(world, "A", clock), creator(world, "B", clock)
    a.membership.register(NOW)
    b.membership.register(NOW)
    user = world.db[dbm.USERS].find_one({"_id": "p0"})
    tok = world.db[dbm.TOKENS].find_one({"userId": "p0"})
    rem = world.db[dbm.REMINDERS].find_one({"userId": "p0"})
    overdue = new_message(rem, user, tok, NOW - dt.timedelta(hours=3), dt.date(2026, 10, 23), NOW)  # type: ignore[arg-type]
    overdue["_id"] = "overdue"
    world.db[dbm.MESSAGES].insert_one(overdue)
    ra, rb = a.run_pass(), b.run_pass()
    zero, other = (ra, rb) if 0 in ra.partitions else (rb, ra)
    assert zero.missed == 1 and other.missed == 0
    assert world.message("overdue")["status"] == Status.IS_MISSED.value


def test_the_single_watermark_of_earlier_creators_seeds_every_partition(world: World) -> None:
    seed(world, users=4)
    until = NOW + dt.timedelta(hours=20)
    world.db[dbm.STATE].insert_one({"_id": LEGACY_ID, "plannedUntil": until})
    report = world.planner(clock=Clock()).run_pass()
    # 20 h of the 24 h horizon were planned: less than a slice (6 h) is left, so no pass.
    assert report.window_start is None and report.inserted == 0
    states = list(world.db[dbm.PARTITIONS].find())
    assert len(states) == world.settings.creator.partitions
    assert {s["plannedUntil"] for s in states} == {until}


def test_documents_without_a_bucket_are_given_one_and_planned(world: World) -> None:
    """Raw inserts (the HTTP API, imports) carry no bucket: a pass gives them theirs."""
    world.db[dbm.USERS].insert_one(
        {"_id": "raw", "timezone": "UTC", "prefs": {"enabled": True}, "dailyCap": None}
    )
    world.db[dbm.TOKENS].insert_one(
        {
            "_id": "t-raw",
            "userId": "raw",
            "deviceId": "d-raw",
            "token": "ExponentPushToken[raw]",
            "isActive": True,
        }
    )
    world.db[dbm.REMINDERS].insert_one(
        {
            "_id": "r-raw",
            "userId": "raw",
            "category": "meal",
            "label": "lunch",
            "time": "12:30",
            "active": True,
            "isDeleted": False,
            "version": 1,
        }
    )
    report = world.planner(clock=Clock()).run_pass()
    assert report.inserted == 1
    for coll in (dbm.USERS, dbm.TOKENS, dbm.REMINDERS):
        assert world.db[coll].find_one({"bucket": None}) is None


def test_a_window_in_progress_written_as_null_does_not_stop_the_pass(world: World) -> None:
    """``inProgress: null`` (written by hand or another tool; every reader takes it as none):
    marking the window must replace it, not fail on it, pass after pass."""
    seed(world, users=4)
    world.planner(clock=Clock()).run_pass()  # creates the partition documents
    world.db[dbm.PARTITIONS].update_many({}, {"$set": {"inProgress": None, "plannedUntil": None}})
    report = world.planner(clock=Clock()).run_pass()
    assert report.inserted == 0 and report.existing > 0, report
    assert world.db[dbm.PARTITIONS].count_documents({"inProgress": {"$exists": True}}) == 0
