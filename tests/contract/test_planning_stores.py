"""The storage seam's contract for what planning needs (partitions and leases, what a pass reads
and inserts, pending messages): the same answers from the memory twin (``backend`` in
conftest.py) and from the MongoDB adapter (the same functions, run by
tests/integration/test_contract_mongo_planning.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from shared.domain.messages import Status
from shared.domain.plan import BUCKETS, bucket_of
from shared.store import db as dbm
from shared.store.abc import Ending, Guard
from shared.store.abc_creator import CreatorStores
from shared.store.abc_planning import Window
from shared.store.memory.plans import PENDING_UNIQUE_KEYS
from shared.store.partitions import LEGACY_ID, partition_id, partitions_of
from tests.contract.backends import Backend

T0 = dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


@pytest.fixture
def stores(backend: Backend) -> CreatorStores:
    assert backend.creator is not None
    return backend.creator


def message(mid: str, due: dt.datetime, **fields: object) -> dict:
    """A pending message of user ``u`` for registration ``t``, its own reminder."""
    return {
        "_id": mid,
        "status": "pending",
        "isDeleted": False,
        "scheduledAt": due,
        "plannedAt": T0,
        "userId": "u",
        "notificationTokenId": "t",
        "category": "meal",
        "label": mid,
        "reminderId": f"rem-{mid}",
        **fields,
    }


def window(start: dt.datetime, end: dt.datetime, since: dt.datetime) -> dict:
    return {"from": start, "to": end, "at": since}


# -- partitions ----------------------------------------------------------------------------------
def test_partitions_are_made_once_each_seeded_by_the_legacy_watermark(backend, stores):
    backend.seed("state", {"_id": LEGACY_ID, "plannedUntil": at(60)})
    docs = stores.partitions.ensure(3)
    assert sorted(docs) == [0, 1, 2]
    assert {(d["_id"], d["of"], d["owner"], d["plannedUntil"]) for d in docs.values()} == {
        (partition_id(p, 3), 3, None, at(60)) for p in range(3)
    }
    assert stores.partitions.ensure(3) == docs  # made once


def test_partitions_of_a_new_count_take_the_earliest_watermark_and_every_window(backend, stores):
    backend.seed(
        "partitions",
        {"_id": "0/2", "p": 0, "of": 2, "owner": "c", "plannedUntil": at(60)},
        {
            "_id": "1/2",
            "p": 1,
            "of": 2,
            "owner": "c",
            "plannedUntil": at(30),
            "inProgress": window(at(30), at(90), at(1)),
        },
    )
    docs = stores.partitions.ensure(4)
    assert {(d["owner"], d["plannedUntil"]) for d in docs.values()} == {(None, at(30))}
    assert {d["p"]: d["inProgress"] for d in docs.values()}[3] == window(at(30), at(90), at(1))


def test_a_window_is_begun_and_finished_only_by_the_partitions_owner(stores):
    parts = stores.partitions
    parts.ensure(2)
    parts.take("c1", ["0/2"], at(10), at(0))
    assert parts.begin("0/2", "c1", Window(at(0), at(60), at(0)))
    assert not parts.begin("0/2", "c2", Window(at(0), at(60), at(0)))
    assert parts.begin(
        "0/2", "c1", Window(at(5), at(70), at(3))
    )  # again: the earliest start is kept
    doc = parts.ensure(2)[0]
    assert doc["inProgress"] == window(at(5), at(70), at(0))
    assert parts.in_progress_since(["0/2", "1/2"]) == at(0)
    assert not parts.finish("0/2", "c2", at(70))
    assert parts.finish("0/2", "c1", at(70))
    assert parts.finish("0/2", "c1", at(50))  # a watermark never moves back
    doc = parts.ensure(2)[0]
    assert doc["plannedUntil"] == at(70) and "inProgress" not in doc
    assert parts.in_progress_since(["0/2", "1/2"]) is None


def test_a_window_that_is_not_a_document_is_replaced(backend, stores):
    backend.seed("partitions", {"_id": "0/1", "p": 0, "of": 1, "owner": "c", "inProgress": None})
    assert stores.partitions.begin("0/1", "c", Window(at(0), at(60), at(1)))
    assert stores.partitions.ensure(1)[0]["inProgress"] == window(at(0), at(60), at(1))


def test_reopening_widens_a_window_never_narrows_it_whoever_holds_the_partition(stores):
    parts = stores.partitions
    parts.ensure(2)
    p = partitions_of(["u1"], 2)["u1"]
    other = 1 - p
    pid = partition_id(p, 2)
    parts.take("c1", [pid], at(10), at(0))
    parts.begin(pid, "c1", Window(at(10), at(20), at(5)))
    parts.reopen(["u1"], 2, Window(at(15), at(40), at(7)))
    parts.reopen(["u1"], 2, Window(at(0), at(30), at(2)))
    docs = parts.ensure(2)
    assert docs[p]["inProgress"] == window(at(0), at(40), at(2))
    assert "inProgress" not in docs[other]


def test_watermarks_are_per_user_partition_and_reach_a_window_in_progress(backend, stores):
    parts = stores.partitions
    ids = ["u1", "u2", "u3", "u4", "u5", "u6"]
    where = partitions_of(ids, 2)
    backend.seed("state", {"_id": LEGACY_ID, "plannedUntil": at(10)})
    assert parts.watermarks(ids, 2) == dict.fromkeys(ids, at(10))  # not made yet: the legacy one
    assert parts.watermarks([], 2) == {}
    parts.ensure(2)
    parts.take("c", ["0/2", "1/2"], at(100), at(0))
    parts.finish("0/2", "c", at(60))
    parts.begin("0/2", "c", Window(at(60), at(90), at(1)))
    marks = parts.watermarks(ids, 2)
    reach = parts.watermarks(ids, 2, reach=True)
    assert marks == {u: at(60) if where[u] == 0 else at(10) for u in ids}
    assert reach == {u: at(90) if where[u] == 0 else at(10) for u in ids}


def test_live_creators_are_those_heard_from_since_and_a_forgotten_one_is_not(stores):
    parts = stores.partitions
    parts.heartbeat("b", at(0), {"host": "h", "pid": 2})
    parts.heartbeat("a", at(5), {"host": "h", "pid": 1})
    parts.heartbeat("c", at(-10), {"host": "h", "pid": 3})
    assert parts.live_since(at(0)) == ["a", "b"]
    parts.heartbeat("c", at(6), {"host": "h", "pid": 3})
    parts.forget("a")
    assert parts.live_since(at(0)) == ["b", "c"]


def test_a_lease_is_taken_where_free_own_or_expired_and_given_back(stores):
    parts = stores.partitions
    parts.ensure(4)
    parts.take("a", ["0/4", "1/4"], at(10), at(0))
    parts.take("b", ["1/4", "2/4"], at(10), at(5))  # 1 is a's until 10
    assert (parts.held("a", 4), parts.held("b", 4)) == ({0, 1}, {2})
    parts.take("b", ["1/4"], at(20), at(11))  # expired
    parts.take("a", ["0/4"], at(20), at(11))  # renewed
    assert (parts.held("a", 4), parts.held("b", 4)) == ({0}, {1, 2})
    assert parts.held("b", 2) == set()
    parts.release("b", ["1/4"])
    assert parts.held("b", 4) == {2}
    parts.take("a", ["1/4"], at(20), at(12))  # free again
    parts.release("a")
    assert parts.held("a", 4) == set()
    assert {d["owner"] for d in parts.ensure(4).values()} == {None, "b"}


def test_buckets_are_given_to_documents_without_one_from_their_user_id(backend, stores):
    backend.seed("users", {"_id": "u1"}, {"_id": "u2", "bucket": 7})
    backend.seed(
        "reminders",
        {"_id": "r1", "userId": "u1"},
        {"_id": "r2", "userId": 42},
        {"_id": "r3", "userId": "u2", "bucket": None},
    )
    backend.seed("tokens", {"_id": "t1", "userId": "u1"})
    assert stores.partitions.backfill_buckets() == 4
    assert stores.partitions.backfill_buckets() == 0
    assert backend.raw("users", "u1")["bucket"] == bucket_of("u1")  # type: ignore[index]
    assert backend.raw("users", "u2")["bucket"] == 7  # type: ignore[index]
    assert backend.raw("reminders", "r3")["bucket"] == bucket_of("u2")  # type: ignore[index]
    assert "bucket" not in backend.raw("reminders", "r2")  # type: ignore[operator]
    assert backend.raw("tokens", "t1")["bucket"] == bucket_of("u1")  # type: ignore[index]


# -- what a planning reads ---------------------------------------------------------------------
def seed_accounts(backend: Backend) -> None:
    backend.seed("users", {"_id": "u1", "bucket": 1}, {"_id": "u2", "bucket": 5})
    rem = {"category": "meal", "active": True, "isDeleted": False, "version": 2}
    backend.seed(
        "reminders",
        {"_id": "r1", "userId": "u1", "bucket": 1, **rem},
        {"_id": "r2", "userId": "u1", "bucket": 1, **rem, "active": False},
        {"_id": "r3", "userId": "u1", "bucket": 1, **rem, "isDeleted": True},
        {"_id": "r4", "userId": "u2", "bucket": 5, **rem},
    )
    backend.seed(
        "tokens",
        {"_id": "t1", "userId": "u1", "deviceId": "d1", "bucket": 1, "isActive": True},
        {"_id": "t2", "userId": "u1", "deviceId": "d1", "bucket": 1, "isActive": False}
        | {"deactivationReason": "x"},
        {"_id": "t3", "userId": "u2", "deviceId": "d3", "bucket": 5, "isActive": True},
    )


def test_a_bucket_range_reads_active_reminders_users_and_active_tokens(backend, stores):
    seed_accounts(backend)
    reminders, users, tokens = stores.plans.read_buckets(0, 5)
    assert [r["_id"] for r in reminders] == ["r1"]
    assert sorted(users) == ["u1"]
    assert {u: [t["_id"] for t in ts] for u, ts in tokens.items()} == {"u1": ["t1"]}
    assert stores.plans.reminders_per_bucket() == 4 / BUCKETS


def test_users_reminders_and_registrations_are_read_by_user(backend, stores):
    seed_accounts(backend)
    plans = stores.plans
    assert sorted(r["_id"] for r in plans.active_reminders_of(["u1", "u2"])) == ["r1", "r4"]
    many = {f"x{i}" for i in range(400)}  # past the adapter's $in threshold: one scan
    assert sorted(plans.users_by_id({"u2", "nope"})) == ["u2"]
    assert sorted(plans.users_by_id(many | {"u1"})) == ["u1"]
    assert sorted(plans.active_tokens_of({"u1", "u2"})) == ["t1", "t3"]
    assert sorted(plans.active_tokens_of(many | {"u2"})) == ["t3"]
    assert plans.token_ids_of(["u1"]) == {"t1", "t2"}
    assert plans.inactive_tokens_of(["u1", "u2"]) == {
        "t2": {"_id": "t2", "userId": "u1", "deactivationReason": "x"}
    }


def test_reminder_versions_are_the_version_and_state_of_those_that_exist(backend, stores):
    seed_accounts(backend)
    backend.seed("reminders", {"_id": "r9", "userId": "u1"})
    assert stores.plans.reminder_versions(["r1", "r9", "nope"]) == {
        "r1": {"_id": "r1", "version": 2, "active": True, "isDeleted": False},
        "r9": {"_id": "r9"},
    }


# -- inserting messages --------------------------------------------------------------------------
def test_an_occurrence_inserted_twice_is_refused_by_id_or_while_pending(backend, stores):
    backend.seed("messages", message("old", at(0)))
    again = message("new-id", at(0), reminderId="rem-old")  # the same occurrence, another id
    docs = [
        message("a", at(1)),
        message("old", at(9)),  # an id that exists
        again,
        message("b", at(2)),
        message("a", at(3)),  # twice in one insert
        message("c", at(1), reminderId="rem-a"),  # a's occurrence, in the same insert
    ]
    inserted, refused = stores.plans.insert_messages(docs, chunk=2)
    assert inserted == 2
    assert [d["_id"] for d in refused] == ["old", "new-id", "a", "c"]
    assert refused[1] is again
    assert stores.plans.existing_ids(["a", "b", "c", "new-id", "old"]) == {"a", "b", "old"}


def test_an_occurrence_no_longer_pending_or_deleted_does_not_hold_its_slot(backend, stores):
    backend.seed(
        "messages",
        message("sent", at(0), status="success"),
        message("gone", at(1), isDeleted=True),
        message("odd", at(2), isDeleted=None),
    )
    docs = [
        message("s2", at(0), reminderId="rem-sent"),
        message("g2", at(1), reminderId="rem-gone"),
        message("o2", at(2), reminderId="rem-odd"),
    ]
    assert stores.plans.insert_messages(docs, chunk=10) == (3, [])
    late = message("s3", at(0), reminderId="rem-sent", status="cancelled")
    assert stores.plans.insert_messages([late], chunk=10) == (1, [])
    assert stores.plans.insert_messages([message("s4", at(0), reminderId="rem-sent")], 10)[0] == 0


def test_missing_fields_of_a_pending_occurrence_count_as_null(stores):
    one = message("n1", at(0))
    two = message("n2", at(0))
    del one["reminderId"], two["reminderId"]
    inserted, refused = stores.plans.insert_messages([one, two], chunk=10)
    assert (inserted, [d["_id"] for d in refused]) == (1, ["n2"])


def test_the_twins_pending_occurrence_is_the_unique_index_declared_for_mongodb():
    (model,) = [
        m for m in dbm.index_plan()[dbm.MESSAGES] if m.document["name"] == dbm.PENDING_UNIQUE
    ]
    assert tuple(model.document["key"]) == PENDING_UNIQUE_KEYS
    assert model.document["unique"] is True
    assert model.document["partialFilterExpression"] == {"status": "pending", "isDeleted": False}


# -- what the repairs read -----------------------------------------------------------------------
def test_messages_planned_in_a_window_and_pending_ones_for_registrations(backend, stores):
    backend.seed(
        "messages",
        message("in", at(10)),
        message("sent", at(10), status="success", notificationTokenId="t2"),
        message("edge", at(20)),
        message("early", at(9)),
        message("later", at(10), plannedAt=at(30)),
        message("other", at(10), userId="v"),
        message("t2", at(11), notificationTokenId="t2"),
    )
    plans = stores.plans
    found = plans.planned_in_window(["u"], Window(at(10), at(20), at(0)))
    assert sorted(found, key=lambda d: d["_id"]) == [
        {"_id": "in", "userId": "u", "notificationTokenId": "t"},
        {"_id": "sent", "userId": "u", "notificationTokenId": "t2"},
        {"_id": "t2", "userId": "u", "notificationTokenId": "t2"},
    ]
    pending = plans.pending_for_tokens(["u"], ["t2"], Window(at(10), at(20), at(0)))
    assert pending == [{"_id": "t2", "notificationTokenId": "t2"}]


# -- pending messages ----------------------------------------------------------------------------
def test_pending_messages_due_are_read_in_due_order_and_counted(backend, stores):
    backend.seed(
        "messages",
        message("c", at(3)),
        message("a", at(1)),
        message("end", at(5)),
        message("b", at(2)),
        message("sent", at(2), status="success"),
        message("deleted", at(2), isDeleted=True),
    )
    pending = stores.pending
    assert [d["_id"] for d in pending.due(at(0), at(5), batch=2)] == ["a", "b", "c"]
    assert pending.count_due(at(0), at(5)) == 3
    fields = sorted(pending.due_fields(at(0), at(5), ("category",)), key=lambda d: d["_id"])
    assert fields == [{"_id": i, "category": "meal"} for i in ("a", "b", "c")]
    reading = pending.due(at(0), at(5), batch=1)
    assert next(reading)["_id"] == "a"
    reading.close()  # a read not to the end is closed


def test_guards_on_messages_are_read_through_the_consumers_guards(stores):
    pending = stores.pending
    assert pending.consumer.guards.take(["m1", "m2"], "c1", at(0)) == {"m1", "m2"}
    assert sorted(pending.guards_on(["m1", "m3"]), key=lambda g: g.id) == [Guard("m1", "c1", at(0))]
    assert isinstance(pending.name, str) and pending.name


def test_pending_ends_are_compare_and_set(backend, stores):
    backend.seed("messages", message("m1", at(0)), message("m2", at(0), status="success"))
    ends = [
        Ending("m1", Status.IS_MISSED, "late", at(1), fields={"lateness_ms": 60_000}),
        Ending("m2", Status.IS_MISSED, "late", at(1)),
    ]
    assert stores.pending.end(ends) == 1
    assert stores.pending.end(ends) == 0
    assert stores.pending.end([]) == 0
    doc = backend.raw("messages", "m1")
    assert doc is not None
    assert (doc["status"], doc["reason"], doc["lateness_ms"]) == ("is_missed", "late", 60_000)


def test_the_server_clock_is_an_aware_instant_or_unknown(stores):
    now = stores.pending.server_now()
    assert now is None or now.tzinfo is not None


def test_a_replay_whose_lease_ran_out_is_settled_by_its_attempt_records(backend, stores):
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    hold = {"run": "run1", "holder": "run1", "by": "op", "at": now - dt.timedelta(hours=1)}
    stale = {**hold, "leaseUntil": now - dt.timedelta(minutes=1), "from": "is_missed"}
    backend.seed(
        "messages",
        message("left", at(0), status="replaying", replay=stale),
        message("kept", at(0), status="replaying", replay=stale, reminderId="r2"),
        message(
            "live",
            at(0),
            status="replaying",
            reminderId="r3",
            replay={
                **hold,
                "holder": "run2",
                "run": "run2",
                "leaseUntil": now + dt.timedelta(minutes=5),
            },
        ),
    )
    backend.seed("attempts", {"_id": "a1", "consumer": "run1", "at": now, "ids": ["left"]})
    assert stores.pending.settle_stale_replays(now, "janitor") == 2
    left, kept, live = (backend.raw("messages", i) for i in ("left", "kept", "live"))
    assert left is not None and kept is not None and live is not None
    assert left["status"] == "failed" and left["reason"].startswith("outcome unknown")
    assert kept["status"] == "is_missed" and kept["replay"]["holder"] is None
    assert kept["replay"]["leftMissed"] == "replay run1 stopped before sending it"
    assert "leaseUntil" not in kept["replay"]
    assert live["status"] == "replaying" and live["replay"]["holder"] == "run2"
    assert stores.pending.settle_stale_replays(now, "janitor") == 0
