"""The paths an app backend, a consumer and an erasure drive read and write through an index.

On SecantusDB a query no index serves reads the whole collection (about 20 ms per 1,000 tokens
measured); a login that scans the tokens gets slower with every user. So every filter these paths
send (finds, updates, deletes, counts, findAndModify) is captured (pymongo command monitoring) and
checked against the indexes by the rule the server follows (``_unserved``, measured on SecantusDB
0.7, 2026-12-02, at 200,000 messages): it picks the index whose first key is the filter's first
field, and a partial index only when the filter names each field of the partial filter with the
same value; ``{isActive: true, userId: {$in}}`` scans (21 ms at 1,100 tokens) where ``{userId:
{$in}, isActive: true}`` is served (0.9 ms); a partial index whose filter has a ``$type`` clause
is never used (78 ms at 5,000 tokens): token strings have a plain index of their own. And these
scan whatever else the filter says:

- a ``findAndModify``, even by ``_id`` (1.4 to 1.9 s, against 4 ms for the same ``update``);
- a filter with a top-level ``$or`` or ``$and``, even beside an ``_id`` (3.1 s by ``_id``; 4.1 s
  for a user's next page of messages, against 3 ms for the first);
- an ``_id`` range or prefix ``$regex`` (4.7 to 5.4 s); an ``_id`` equality or ``$in`` is a
  point read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from pymongo.database import Database

from shared.store import db as dbm
from tests.integration.command_log import commands_of

Doc = dict[str, Any]
Sent = tuple[str, str, Doc]  # command, collection, filter


def _filters(command: str, body: Any) -> list[tuple[str, Doc]]:
    """(collection, filter) of every read or write that picks documents in one command."""
    if command == "find":
        return [(str(body["find"]), dict(body.get("filter") or {}))]
    if command == "findAndModify":
        return [(str(body["findAndModify"]), dict(body.get("query") or {}))]
    if command == "count":
        return [(str(body["count"]), dict(body.get("query") or {}))]
    if command == "update":
        return [(str(body["update"]), dict(u.get("q") or {})) for u in body.get("updates", [])]
    if command == "delete":
        return [(str(body["delete"]), dict(d.get("q") or {})) for d in body.get("deletes", [])]
    if command == "aggregate":
        stages = body.get("pipeline") or [{}]
        return [(str(body["aggregate"]), dict(stages[0].get("$match") or {}))]
    return []


@pytest.fixture
def reads() -> Callable[[Callable[[], Any]], list[Sent]]:
    """``reads(action)``: the (command, collection, filter) of what ``action`` sent."""

    def record(action: Callable[[], Any]) -> list[Sent]:
        return [
            (name, coll, flt)
            for name, body in commands_of(action)
            for coll, flt in _filters(name, body)
        ]

    return record


def _point(value: Any) -> bool:
    """An ``_id`` condition the ``_id`` index answers: equality or ``$in``."""
    if not isinstance(value, dict):
        return True
    return set(value) <= {"$eq", "$in"}


def _indexable(value: Any) -> bool:
    """A condition an index range answers: equality, ``$in`` or a range (not ``$ne``, ``$not``,
    ``$regex``, ``$exists: false``, which read the whole index or the collection)."""
    if not isinstance(value, dict):
        return True
    return bool(value) and set(value) <= {"$eq", "$in", "$gt", "$gte", "$lt", "$lte"}


def _unserved(db: Database[Doc], sent: list[Sent]) -> list[str]:
    """The commands whose filter no index serves, by the rule in the module's docstring
    (measured; the server's ``explain`` claims a COLLSCAN for queries it serves from an index,
    so it cannot be the oracle). An empty filter, and any filter on a collection small by design
    (``SMALL``), is let be."""
    out = []
    for command, coll, flt in sent:
        if command == "findAndModify":
            out.append(f"findAndModify {coll} {flt} (always a scan here)")
            continue
        if not flt or coll in SMALL:
            continue
        logic = {"$or", "$and", "$nor"} & set(flt)
        if logic:
            out.append(f"{command} {coll} {flt} (top-level {sorted(logic)})")
            continue
        first = next(iter(flt))
        if first == "_id":
            if not _point(flt["_id"]):
                out.append(f"{command} {coll} {flt} (an _id range or pattern)")
            continue
        served = False
        for ix in db[coll].list_indexes():
            keys = list(ix["key"])
            # The filter's first field leads the index; or a compound index's first key is
            # in the filter (its equality-prefix-then-range lookup serves it in any order).
            if keys[0] != first and not (len(keys) > 1 and keys[0] in flt):
                continue
            if not _indexable(flt[keys[0]]):
                continue
            partial = ix.get("partialFilterExpression") or {}
            if all(flt.get(k) == v for k, v in partial.items()):
                served = True
        for ix in db[coll].list_indexes():
            # A one-key partial index whose key is in the filter, every other field of the
            # filter being one its partial filter fixes (``missed_by_time`` for a replay).
            keys, partial = list(ix["key"]), ix.get("partialFilterExpression") or {}
            if len(keys) == 1 and partial and keys[0] in flt and _indexable(flt[keys[0]]):
                rest = set(flt) - {keys[0]}
                if rest <= set(partial) and all(flt[k] == partial[k] for k in rest):
                    served = True
        if not served:
            out.append(f"{command} {coll} {flt}")
    return out


# Collections small by design, read by a field no index has.
SMALL = {
    # A consumer's outcomes not merged yet: one document per group commit, deleted once merged.
    dbm.JOURNAL,
    # Requests whose outcomes are not merged yet, deleted once they are (a dead consumer's
    # expire after 7 days).
    dbm.ATTEMPTS,
    # One document per partition (16 by default).
    dbm.PARTITIONS,
}


def test_a_login_reads_only_through_indexes(world, reads):
    m = world.manager()
    world.planner().run_pass()  # a planned window: a login plans the new device at once
    for i in range(20):
        world.user(f"u{i}", device=f"d{i}", token=f"ExponentPushToken[t{i}]", manager=m)
        m.add_reminder(f"u{i}", category="meal", label="lunch", at="12:30")
    finds = reads(lambda: m.register_token("u3", device="new-phone", token="ExponentPushToken[n]"))
    assert finds, "the login read nothing?"
    scans = _unserved(world.db, finds)
    assert not scans, "\n".join(scans)


def test_active_registrations_without_a_token_string_do_not_collide(db):
    """Documents written without a token (by hand, by another tool) are bad documents the
    planner reports, not a reason for the unique index to refuse the next one (or to fail to
    build on an existing database)."""
    dbm.ensure_indexes(db)
    db[dbm.TOKENS].insert_many(
        [{"_id": f"t{i}", "userId": "u", "deviceId": f"d{i}", "isActive": True} for i in range(3)]
    )
    assert db[dbm.TOKENS].count_documents({"isActive": True}) == 3


def test_the_look_for_stopped_replays_reads_through_an_index(world, reads):
    """The janitor (and every replay's start) looks for ``replaying`` messages whose lease ran
    out. It read the whole messages collection: at 1M messages, with another creator inserting,
    that read passed the driver's 30 s socket timeout and the creator's pass failed
    (bench scale, 2 creators, 2026-12-01)."""
    from shared.clock import utcnow
    from shared.store import replays
    from shared.store.mongo import replay_stores

    dbm.ensure_indexes(world.db)
    finds = reads(lambda: replays.stale_holders(replay_stores(world.db).replays, utcnow()))
    assert finds
    scans = _unserved(world.db, finds)
    assert not scans, "\n".join(scans)


def test_the_replaying_index_hides_no_other_status(db):
    """The server here picks its index by the filter's first field: a query on ``status`` must
    still see every status, not only the ``replaying`` ones the partial index holds."""
    dbm.ensure_indexes(db)
    at = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    base = {"isDeleted": False, "scheduledAt": at, "userId": "u", "category": "meal"}
    db[dbm.MESSAGES].insert_many(
        [
            {**base, "_id": "p1", "status": "pending", "label": "a", "reminderId": "ra"},
            {**base, "_id": "p2", "status": "pending", "label": "b", "reminderId": "rb"},
            {**base, "_id": "r1", "status": "replaying", "label": "c"},
            {**base, "_id": "m1", "status": "is_missed", "label": "d"},
        ]
    )
    msgs = db[dbm.MESSAGES]
    assert msgs.count_documents({"status": "pending"}) == 2
    assert msgs.count_documents({"status": "pending", "isDeleted": False, "scheduledAt": at}) == 2
    assert {d["_id"] for d in msgs.find({"status": "is_missed"})} == {"m1"}
    assert {d["_id"] for d in msgs.find({"status": "replaying"})} == {"r1"}


T0 = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)


def test_a_consumers_token_effects_go_through_indexes(world, reads):
    """A consumer's merge applies one token effect per push outcome. A failure was counted with
    a findAndModify and a success reset a failing token with an ``_id`` beside an ``$or``: each
    a read of every registration here (1.4 to 3 s at 200,000 documents), once per failed push."""
    from shared.domain.outcomes import EffectKind, TokenEffect
    from shared.store.tokens import apply_token_effects

    dbm.ensure_indexes(world.db)
    a, b, c = (world.user(f"fx{i}") for i in range(3))
    effects = [
        TokenEffect(a["_id"], "fx0", EffectKind.FAIL, "flaky", T0, "m1"),
        TokenEffect(b["_id"], "fx1", EffectKind.FAIL, "flaky", T0, "m2"),
        TokenEffect(b["_id"], "fx1", EffectKind.OK, "", T0 + dt.timedelta(seconds=1), "m3"),
        TokenEffect(c["_id"], "fx2", EffectKind.DEAD, "DeviceNotRegistered", T0, "m4"),
    ]
    sent = reads(lambda: apply_token_effects(world.db, effects, 3, T0 + dt.timedelta(minutes=1)))
    assert sent
    scans = _unserved(world.db, sent)
    assert not scans, "\n".join(scans)
    toks = {d["_id"]: d for d in world.db[dbm.TOKENS].find()}
    assert (toks[a["_id"]]["failureCount"], toks[a["_id"]]["isActive"]) == (1, True)
    assert (toks[b["_id"]]["failureCount"], toks[b["_id"]]["isActive"]) == (0, True)
    assert toks[c["_id"]]["isActive"] is False


def _capped(n: int, user: str = "capper", date: str = "2026-12-02") -> list[Any]:
    from shared.wire import Item

    return [
        Item(f"{user}-m{i}", 0, user, "r", 1, "t", "ExponentPushToken[c]", local_date=date, cap=2)
        for i in range(n)
    ]


def test_the_daily_cap_is_reserved_through_indexes(world, reads):
    """Just before a capped user's push the consumer reserves the day's cap. That was a
    findAndModify: a read of every day's counter of every capped user, on the send path."""
    from shared.store.intent import daily_cap_reasons

    dbm.ensure_indexes(world.db)
    first = _capped(3)
    sent = reads(lambda: daily_cap_reasons(world.db, first, {i.id: 2 for i in first}))
    scans = _unserved(world.db, sent)
    assert not scans, "\n".join(scans)
    over = daily_cap_reasons(world.db, _capped(1, date="2026-12-03"), {"capper-m0": 2})
    assert over == {}
    assert world.db[dbm.COUNTERS].find_one({"_id": "capper:2026-12-02"})["count"] == 2


def test_the_daily_cap_is_never_over_reserved(world):
    from shared.store.intent import daily_cap_reasons

    dbm.ensure_indexes(world.db)
    items = _capped(3)
    over = daily_cap_reasons(world.db, items, {i.id: 2 for i in items})
    assert set(over) == {"capper-m2"}
    assert over["capper-m2"] == "daily cap of 2 reached for 2026-12-02"
    again = _capped(2)
    assert set(daily_cap_reasons(world.db, again, {i.id: 2 for i in again})) == {
        "capper-m0",
        "capper-m1",
    }
    assert world.db[dbm.COUNTERS].find_one({"_id": "capper:2026-12-02"})["count"] == 2


def test_a_users_messages_are_read_through_an_index(world, reads):
    """``GET /v1/users/{id}/messages`` (every page), each reminder's last occurrence and the
    console's user page. A next page was an ``$and`` of the range and the cursor: a read of
    every message ever planned (4.1 s at 200,000 here, against 3 ms for the first page)."""
    from api.app import ensure_api_indexes
    from api.console.records import user_record
    from shared.store.mongo.history import last_occurrences, messages_page

    ensure_api_indexes(world.db)
    dbm.ensure_indexes(world.db)
    base = {"userId": "pager", "isDeleted": False, "category": "meal", "status": "success"}
    at = [T0, T0, T0 + dt.timedelta(hours=1), T0 + dt.timedelta(hours=1), T0 + dt.timedelta(days=1)]
    world.db[dbm.MESSAGES].insert_many(
        [{**base, "_id": f"p{i}", "label": f"l{i}", "scheduledAt": a} for i, a in enumerate(at)]
        + [{**base, "_id": "other", "userId": "someone", "label": "x", "scheduledAt": T0}]
    )
    seen: list[str] = []

    def walk() -> None:
        after = None
        while True:
            docs, more = messages_page(world.db, "pager", limit=2, after=after)
            seen.extend(d["_id"] for d in docs)
            if not more:
                return
            after = (docs[-1]["scheduledAt"], docs[-1]["_id"])

    sent = reads(walk)
    assert seen == ["p0", "p1", "p2", "p3", "p4"]
    sent += reads(lambda: last_occurrences(world.db, "pager", [{"_id": "r1"}], T0))
    sent += reads(lambda: user_record(world.db, "pager", {}, T0))
    scans = _unserved(world.db, sent)
    assert not scans, "\n".join(scans)


def test_an_erasure_goes_through_indexes(world, reads):
    """``DELETE /v1/users/{id}`` and ``tzpush users erase``: the user's messages by user id
    (the index is in every database, not only one the API started on) and their daily-cap
    counters (deleted by an ``_id`` prefix: a read of every counter)."""
    from creator.accounts import erase_user
    from shared.store.intent import daily_cap_reasons

    dbm.ensure_indexes(world.db)
    m = world.manager()
    world.user("gone", manager=m, daily_cap=2)
    world.user("kept", manager=m, daily_cap=2)
    m.add_reminder("gone", category="meal", label="lunch", at="12:30")
    world.planner().run_pass()
    for user in ("gone", "kept"):
        items = _capped(1, user=user)
        daily_cap_reasons(world.db, items, {i.id: 2 for i in items})
    sent = reads(lambda: erase_user(m, "gone"))
    scans = _unserved(world.db, sent)
    assert not scans, "\n".join(scans)
    assert [d["_id"] for d in world.db[dbm.COUNTERS].find()] == ["kept:2026-12-02"]


def test_a_consumers_send_path_goes_through_indexes(world, reads, monkeypatch):
    """Everything a consumer sends to the database while it delivers a wake-up of every kind of
    item: a plain one, a capped user's two (one over the cap), a dead token, a failing token (a
    code marked as counting against the device), and a user whose zone changed after planning
    (judged from the current documents): its guards, attempts, journal, merge, token hygiene,
    caps and receipts. Small collections a consumer reads whole (its fences, the fleet's
    registry) are let be by the empty-filter rule."""
    from shared.domain import outcomes
    from tests.integration.harness import wait_for

    codes = outcomes.ErrorCode
    monkeypatch.setitem(outcomes.TOKEN_EFFECTS, codes.UNKNOWN, outcomes.EffectKind.FAIL)
    dbm.ensure_indexes(world.db)
    m = world.manager()
    world.user("plain", manager=m)
    world.user("capped", manager=m, daily_cap=1)
    dead = world.user("dead", manager=m)
    flaky = world.user("flaky", manager=m)
    world.user("moved", manager=m)
    world.fake.configure(dead_at_ticket=[dead["token"]], ticket_errors={flaky["token"]: ["Odd"]})
    due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3)
    users = ["plain", "capped", "dead", "flaky", "moved"]
    docs = world.due_messages(users, due, label="a", planner=m.planner)
    docs += world.due_messages(["capped"], due, label="b", planner=m.planner)
    m.upsert_user("moved", timezone="Asia/Tashkent")
    ids = [d["_id"] for d in docs]

    def deliver() -> None:
        rc = world.start_consumer()
        wait_for(lambda: world.settled(ids), 25, what="all terminal and merged")
        rc.stop()

    sent = reads(deliver)
    ends = {(d["userId"], d["label"]): world.message(d["_id"]) for d in docs}
    assert ends["plain", "a"]["status"] == "success"
    capped = sorted((ends["capped", k]["status"], ends["capped", k].get("reason")) for k in "ab")
    assert capped[0] == ("cancelled", f"daily cap of 1 reached for {due.date()}")
    assert capped[1][0] == "success"
    assert (ends["dead", "a"]["status"], ends["dead", "a"]["error"]) == (
        "failed",
        "DeviceNotRegistered",
    )
    assert (ends["flaky", "a"]["status"], ends["flaky", "a"]["error"]) == ("failed", "Odd")
    assert ends["moved", "a"]["status"] == "cancelled"
    scans = _unserved(world.db, sent)
    assert not scans, "\n".join(sorted(set(scans)))


def test_a_pass_the_janitor_and_a_replay_go_through_indexes(world, reads):
    """What a creator sends for a planning pass and its janitor's sweep (messages past grace
    end ``is_missed``), and what ``tzpush replay`` sends to select and send them again: on a
    collection that grows every day, each of these runs every interval or at an incident."""
    from creator.janitor import sweep
    from shared.clock import utcnow
    from shared.store.mongo import creator_stores
    from tests.integration.ops_helpers import run_cli

    dbm.ensure_indexes(world.db)
    m = world.manager()
    for u in ("p1", "p2", "p3"):
        world.user(u, "Asia/Tashkent", manager=m)
        m.add_reminder(u, category="meal", label="lunch", at="12:30")
    sent = reads(lambda: world.planner().run_pass())
    due = (utcnow() - dt.timedelta(hours=1)).replace(microsecond=0)
    world.due_messages(["p1", "p2"], due, arm=False, category="safety", label="x")
    sent += reads(lambda: sweep(creator_stores(world.db).pending, world.settings, utcnow()))
    assert run_cli(world.settings, "replay", "--dry-run") == 0
    sent += reads(lambda: run_cli(world.settings, "replay", "--yes", "--by", "t", "--reason", "r"))
    assert len(world.fake.pushes()) == 2
    scans = _unserved(world.db, sent)
    assert not scans, "\n".join(sorted(set(scans)))


def test_stats_read_messages_and_registrations_once_each_through_a_cursor(world, reads):
    """``tzpush stats``, ``GET /v1/stats`` and the console's overview read every message. As
    aggregations (five over the messages, two over the registrations) each had to finish within
    one round trip: at 200,000 messages the whole took 19.3 s here and the overview 24 s, so at
    1M each aggregation passed the driver's 30 s timeout. One cursor over each collection
    answers batch by batch, each batch well inside it."""
    from ops.stats import compute

    dbm.ensure_indexes(world.db)
    world.user("s1")
    sent = reads(lambda: compute(world.db, None))
    big = [(c, coll) for c, coll, _ in sent if coll in (dbm.MESSAGES, dbm.TOKENS)]
    assert sorted(big) == [("find", dbm.MESSAGES), ("find", dbm.TOKENS)]


def test_a_counter_made_by_another_consumer_at_the_same_moment_leaves_the_room_it_has(
    world, monkeypatch
):
    """Two consumers reserve a capped user's first push of a day at once: one upsert makes the
    counter, the other's fails with a duplicate key. That failure does not mean "no room":
    with a cap of 3 and 1 taken there are 2 left, and the push must go."""
    import pymongo.collection
    from pymongo.errors import DuplicateKeyError

    from shared.store.intent import daily_cap_reasons

    dbm.ensure_indexes(world.db)
    real = pymongo.collection.Collection.update_one
    raced: list[bool] = []

    def the_other_consumer_first(self, flt, update, *a, **kw):
        if self.name == dbm.COUNTERS and not raced:
            raced.append(True)
            self.insert_one({"_id": flt["_id"], "count": 1, "userId": "capper"})
            raise DuplicateKeyError("E11000 duplicate key error (the other consumer's upsert)")
        return real(self, flt, update, *a, **kw)

    monkeypatch.setattr(pymongo.collection.Collection, "update_one", the_other_consumer_first)
    items = [replace(i, cap=3) for i in _capped(1)]
    assert daily_cap_reasons(world.db, items, {items[0].id: 3}) == {}
    assert raced
    assert world.db[dbm.COUNTERS].find_one({"_id": "capper:2026-12-02"})["count"] == 2


def test_the_consoles_upcoming_day_is_read_an_hour_at_a_time(world, reads):
    """The upcoming page counts the pending messages of the next 24 h by hour. The server here
    answers a whole read in its first round trip: a day of a million reminders read at once
    came near the driver's 30 s. Each read is an hour's range of the pending index, and the
    counts are those of the whole day."""
    from api.console.figures import upcoming
    from shared.settings import Settings

    dbm.ensure_indexes(world.db)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    base = {"status": "pending", "isDeleted": False, "category": "meal", "label": "x"}
    offsets = [-5, 10, 70, 71, 23 * 60 + 50, 25 * 60]  # minutes from now
    world.db[dbm.MESSAGES].insert_many(
        [
            {
                **base,
                "_id": f"up{i}",
                "userId": f"u{i}",
                "scheduledAt": now + dt.timedelta(minutes=m),
            }
            for i, m in enumerate(offsets)
        ]
    )
    got: list[Any] = []
    sent = reads(lambda: got.append(upcoming(world.db, Settings(), now)))
    counts = {h: dict(c) for h, c in got[0].counts.items() if c}
    hour = now.replace(minute=0, second=0)

    def h(minutes: int) -> dt.datetime:
        at = now + dt.timedelta(minutes=minutes)
        return at.replace(minute=0, second=0)

    expected: dict[dt.datetime, dict[str, int]] = {}
    for m in (10, 70, 71, 23 * 60 + 50):
        expected.setdefault(h(m), {"meal": 0})["meal"] += 1
    assert counts == expected and got[0].overdue == 1
    ranges = [f["scheduledAt"] for c, coll, f in sent if c == "find" and coll == dbm.MESSAGES]
    assert ranges and all(r["$lt"] - r["$gte"] <= dt.timedelta(hours=1) for r in ranges)
    assert ranges[0]["$gte"] == now and hour < ranges[0]["$lt"]


def test_the_consoles_problems_go_through_indexes(world, reads):
    """The problems page: reasons of missed and failed messages, the chosen status's messages,
    how many a replay would take, and whether one failed message is replayable. The failed
    messages' reasons read every message (29.1 s at 1M here, against the driver's 30 s), and
    the replayable counts were an ``$or`` (a read of every message, even beside an ``_id``)."""
    from api.console.figures import ProblemFilter, problems, replayable_failed

    dbm.ensure_indexes(world.db)
    at = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    base = {"isDeleted": False, "scheduledAt": at, "userId": "p", "category": "meal"}
    world.db[dbm.MESSAGES].insert_many(
        [
            {
                **base,
                "_id": "f1",
                "status": "failed",
                "label": "a",
                "errorCode": "InvalidCredentials",
            },
            {
                **base,
                "_id": "f2",
                "status": "failed",
                "label": "b",
                "errorCode": "DeviceNotRegistered",
            },
            {**base, "_id": "f3", "status": "failed", "label": "c"}
            | {"receipt": {"state": "error", "error": "InvalidCredentials"}},
            {**base, "_id": "m1", "status": "is_missed", "label": "d", "reason": "late"},
        ]
    )
    got: list[Any] = []
    sent = reads(lambda: got.append(problems(world.db, ProblemFilter())))
    sent += reads(lambda: got.append(problems(world.db, ProblemFilter(status="failed"))))
    flags: list[bool] = []
    sent += reads(lambda: flags.extend(replayable_failed(world.db, i) for i in ("f1", "f2")))
    assert (got[0].total, got[0].replayable) == (1, 1)
    assert (got[1].total, got[1].replayable) == (3, 2)
    assert flags == [True, False]
    scans = _unserved(world.db, sent)
    assert not scans, "\n".join(sorted(set(scans)))


def test_a_replay_of_failed_messages_goes_through_indexes(world, reads):
    """``tzpush replay --status failed`` (after an Expo credentials incident, thousands of
    them): its selection had the cause as an ``$or`` (a read of every message), and it took
    each message with an ``_id`` beside that ``$or``: a read of every message per message."""
    from tests.integration.ops_helpers import run_cli

    dbm.ensure_indexes(world.db)
    for u in ("rf1", "rf2", "rf3"):
        world.user(u)
    at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=30)
    docs = world.due_messages(["rf1", "rf2", "rf3"], at, arm=False)
    codes = {"rf1": "InvalidCredentials", "rf2": "DeviceNotRegistered"}
    for d in docs:
        change: Doc = {"status": "failed", "reason": "x"}
        if d["userId"] in codes:
            change["errorCode"] = codes[d["userId"]]
        else:
            change["receipt"] = {"state": "error", "error": "InvalidCredentials"}
        world.db[dbm.MESSAGES].update_one({"_id": d["_id"]}, {"$set": change})
    args = ("replay", "--status", "failed", "--yes", "--by", "t", "--reason", "INC-1")
    sent = reads(lambda: run_cli(world.settings, *args))
    pushed = {p["to"] for p in world.fake.pushes()}
    assert pushed == {"ExponentPushToken[rf1]", "ExponentPushToken[rf3]"}
    scans = _unserved(world.db, sent)
    assert not scans, "\n".join(sorted(set(scans)))


def test_a_users_messages_page_through_instants_shared_by_more_than_a_page(world):
    """Pages in the index's order, the order by id within an instant made by ``messages_page``
    (one instant's messages read whole): every message once, in (instant, id) order, whatever
    the page size, with an instant shared by more messages than a page holds."""
    from shared.store.mongo.history import messages_page

    dbm.ensure_indexes(world.db)
    base = {"userId": "ties", "isDeleted": False, "category": "meal", "status": "success"}
    at = [T0] * 5 + [T0 + dt.timedelta(hours=1)] * 3 + [T0 + dt.timedelta(days=1)]
    docs = [{**base, "_id": f"t{i}", "label": f"l{i}", "scheduledAt": a} for i, a in enumerate(at)]
    world.db[dbm.MESSAGES].insert_many(list(reversed(docs)))  # stored out of id order
    for limit in (1, 2, 3, 4, 9, 10):
        seen: list[str] = []
        after = None
        while True:
            page, more = messages_page(world.db, "ties", limit=limit, after=after)
            assert len(page) <= limit
            seen.extend(d["_id"] for d in page)
            if not more:
                break
            after = (page[-1]["scheduledAt"], page[-1]["_id"])
        assert seen == [f"t{i}" for i in range(9)], (limit, seen)
    late = messages_page(world.db, "ties", limit=2, start=T0 + dt.timedelta(minutes=1))[0]
    assert [d["_id"] for d in late] == ["t5", "t6"]
    assert (
        messages_page(world.db, "ties", limit=5, end=T0 + dt.timedelta(hours=1))[0][-1]["_id"]
        == "t4"
    )


def _history_reads(db: Database[Doc], sent: list[Sent], most: int) -> list[str]:
    """The reads of a user's messages that are not one range of ``(userId, scheduledAt)``
    holding at most ``most`` of them (what the server reads for it).

    The server here walks a compound index's range only for a filter of exactly its equality
    prefix and one range after it (``{userId, scheduledAt: {$gt, $lte}}``); one field more
    (a ``reminderId`` ``$in``, a ``status``) and it reads every message the user ever had (3 ms
    for two days of one user's 3,670 messages, 104 to 166 ms with that field, measured on
    SecantusDB 0.7, 2026-12-02). It reads a whole range before a sort's limit too, and a
    count reads what it counts (145 ms for those 3,670)."""
    out = []
    for command, coll, flt in sent:
        if coll != dbm.MESSAGES or "userId" not in flt:
            continue
        if set(flt) != {"userId", "scheduledAt"}:
            out.append(f"{command} {flt} (a field beside the index's)")
            continue
        held = db[coll].count_documents(flt)
        if held > most:
            out.append(f"{command} {flt} ({held} messages in its range)")
    return out


def test_a_users_recent_messages_are_read_without_their_history(world, reads, monkeypatch):
    """A year of one user's messages (two reminders a day), then what the API and the console
    show of the last days: each reminder's last occurrence (``GET .../reminders``), a page of
    their messages, the console's user page. Each read of the user's
    messages is one range of the index holding a few days of them (``_history_reads``), so its
    cost follows the days shown, not the history. Before: the last occurrences read every past
    message of the reminders listed, each page every message from its cursor on, the console's
    timeline and count the whole history."""
    from api.console.records import user_record
    from shared.store.mongo.history import last_occurrences, messages_page

    dbm.ensure_indexes(world.db)
    born = T0 - dt.timedelta(days=400)
    world.db[dbm.USERS].insert_one({"_id": "old", "timezone": "UTC", "createdAt": born})
    reminders = [
        {
            "_id": r,
            "userId": "old",
            "category": "meal",
            "label": r,
            "time": "12:00",
            "isDeleted": False,
            "version": 1,
            "createdAt": born,
        }
        for r in ("a", "b")
    ]
    reminders.append({**reminders[0], "_id": "new", "label": "new", "createdAt": T0})
    world.db[dbm.REMINDERS].insert_many(reminders)
    base = {"userId": "old", "isDeleted": False, "category": "meal", "notificationTokenId": "t"}
    world.db[dbm.MESSAGES].insert_many(
        [
            {
                **base,
                "_id": f"{r}{d}",
                "reminderId": r,
                "label": r,
                "status": status,
                "scheduledAt": T0 - dt.timedelta(days=d, hours=1 + (r == "b")),
            }
            for d in range(365)
            for r, status in (("a", "success"), ("b", "failed" if d % 30 == 0 else "success"))
        ]
    )
    sent = reads(lambda: last_occurrences(world.db, "old", reminders, T0))
    last = last_occurrences(world.db, "old", reminders, T0)
    assert {r: d["_id"] for r, d in last.items()} == {"a": "a0", "b": "b0"}
    first: list[Doc] = []
    since = T0 - dt.timedelta(days=10)
    sent += reads(lambda: first.extend(messages_page(world.db, "old", limit=5, start=since)[0]))
    assert [d["_id"] for d in first] == ["b9", "a9", "b8", "a8", "b7"]
    # A page of one status is one read of the user's messages (history.messages_page): not
    # checked for its cost here, only for its answer.
    since = T0 - dt.timedelta(days=40)
    failed = messages_page(world.db, "old", limit=5, start=since, status="failed")[0]
    assert [d["_id"] for d in failed] == ["b30", "b0"]
    end_of_time = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)
    assert messages_page(world.db, "old", limit=5, start=end_of_time) == ([], False)
    # From the start: the first is the oldest, whatever instant is given before it.
    oldest = messages_page(world.db, "old", limit=1, start=dt.datetime(1, 1, 1, tzinfo=dt.UTC))
    assert [d["_id"] for d in oldest[0]] == ["b364"] and oldest[1]
    from api.console import records

    monkeypatch.setattr(records, "COUNTED", 100)  # counted up to 100 of the 730, "or more"
    record = user_record(world.db, "old", {}, T0)
    assert [m["_id"] for m in record.messages[:3]] == ["a0", "b0", "a1"]
    assert len(record.messages) == 50
    assert record.message_total >= 100 and record.message_total_more
    sent += reads(lambda: user_record(world.db, "old", {}, T0))
    history = _history_reads(world.db, sent, 200)
    assert not history, "\n".join(history)
