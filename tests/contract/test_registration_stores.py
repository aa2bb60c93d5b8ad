"""The storage seam's contract for device registrations and the creator's change log: the same
answers from the memory twin (``backend`` in conftest.py) and from the MongoDB adapter (the same
functions, run by tests/integration/test_contract_mongo_registrations.py)."""

from __future__ import annotations

import datetime as dt

from shared.store import tokens
from shared.store.intent import CHANGE_SKEW, changed_in, erased_in
from tests.contract.backends import Backend

T0 = dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def reg(tid: str, user: str, device: str, active: bool = True, created: float = 0) -> dict:
    """A registration document: ``user`` on ``device``, its token string named after it."""
    return {
        "_id": tid,
        "userId": user,
        "deviceId": device,
        "token": f"ExponentPushToken[{device}]",
        "isActive": active,
        "failureCount": 0,
        "createdAt": at(created),
        "updatedAt": at(created),
    }


def ids(docs: list[dict]) -> set[str]:
    return {d["_id"] for d in docs}


def off(*pairs: tuple[str, str]) -> list[dict]:
    """What a deactivation answers, in id order: ``{_id, userId}``."""
    return [{"_id": t, "userId": u} for t, u in sorted(pairs)]


# -- reads -------------------------------------------------------------------------------------
def test_the_registrations_of_a_device_or_token_string_are_the_active_ones_each_once(
    backend: Backend,
):
    other_string = {**reg("t3", "cy", "tablet"), "token": "ExponentPushToken[phone]"}
    backend.seed(
        "tokens",
        reg("t1", "ann", "phone"),
        {**reg("t2", "bob", "phone", active=False)},
        {**other_string, "isActive": False},
        reg("t4", "dan", "laptop"),
    )
    regs = backend.creator.registrations
    assert ids(regs.active_for("phone", "ExponentPushToken[phone]")) == {"t1"}
    assert ids(regs.active_for("tablet", "ExponentPushToken[laptop]")) == {"t4"}
    assert regs.active_for("none", "ExponentPushToken[none]") == []
    found = regs.active_holding(["phone", "laptop"], ["ExponentPushToken[phone]"])
    assert sorted(d["_id"] for d in found) == ["t1", "t4"]
    assert found[0]["userId"] in ("ann", "dan")
    assert regs.active_holding([], []) == []


def test_a_users_registrations_are_all_of_theirs_oldest_first(backend: Backend):
    backend.seed(
        "tokens",
        reg("new", "ann", "tablet", created=20),
        reg("old", "ann", "phone", active=False, created=10),
        reg("bob's", "bob", "laptop", created=5),
    )
    regs = backend.creator.registrations
    assert [d["_id"] for d in regs.of_user("ann")] == ["old", "new"]
    assert regs.of_user("nobody") == []


# -- inserts -----------------------------------------------------------------------------------
def test_an_insert_is_refused_while_an_active_registration_holds_its_device_or_token_string(
    backend: Backend,
):
    backend.seed("tokens", reg("t1", "ann", "phone"), reg("t0", "old", "tablet", active=False))
    regs = backend.creator.registrations
    assert regs.insert(reg("t2", "bob", "phone")) is False  # the device is held
    same_string = {**reg("t3", "bob", "phone-2"), "token": "ExponentPushToken[phone]"}
    assert regs.insert(same_string) is False  # the token string is held
    assert regs.insert(reg("t1", "bob", "laptop")) is False  # the id exists
    assert regs.insert(reg("t4", "bob", "tablet")) is True  # its holder is inactive
    assert regs.insert(reg("t5", "cy", "phone", active=False)) is True  # inactive: no conflict
    assert ids(regs.of_user("bob")) == {"t4"}
    assert backend.raw("tokens", "t2") is None


def test_registrations_without_a_token_string_do_not_collide_on_it(backend: Backend):
    regs = backend.creator.registrations
    assert regs.insert({**reg("t1", "ann", "phone"), "token": None}) is True
    assert regs.insert({**reg("t2", "bob", "tablet"), "token": None}) is True


def test_many_inserts_each_stand_alone_and_the_refused_are_named_by_position(backend: Backend):
    backend.seed("tokens", reg("held", "ann", "phone"))
    regs = backend.creator.registrations
    docs = [
        reg("t1", "bob", "tablet"),
        reg("t2", "bob", "phone"),  # the device is held
        reg("t3", "cy", "laptop"),
        reg("t4", "dan", "tablet"),  # taken by t1, just now
    ]
    assert regs.insert_many(docs) == {1, 3}
    assert ids(regs.active_holding(["tablet", "laptop"], [])) == {"t1", "t3"}
    assert regs.insert_many([]) == set()


# -- deactivation and deletion -----------------------------------------------------------------
def test_a_handover_turns_off_only_the_named_active_registrations(backend: Backend):
    backend.seed("tokens", reg("t1", "ann", "phone"), reg("t2", "bob", "tablet", active=False))
    regs = backend.creator.registrations
    assert regs.deactivate(["t1", "t2", "nope"], "token replaced", at(5)) == off(("t1", "ann"))
    assert regs.deactivate(["t1"], "again", at(6)) == []
    doc = backend.raw("tokens", "t1")
    assert doc is not None
    assert (doc["isActive"], doc["deactivationReason"]) == (False, "token replaced")
    assert doc["deactivatedAt"] == doc["updatedAt"] == at(5)


def test_unregistering_turns_off_what_holds_the_token_string_and_the_device_id(backend: Backend):
    backend.seed(
        "tokens", reg("t1", "ann", "phone"), reg("t2", "bob", "tablet"), reg("t3", "cy", "laptop")
    )
    regs = backend.creator.registrations
    by_string = regs.deactivate_holding(
        "unregistered", at(1), token="ExponentPushToken[phone]", device=None
    )
    assert by_string == off(("t1", "ann"))
    assert regs.deactivate_holding("unregistered", at(1), token=None, device="tablet") == off(
        ("t2", "bob")
    )
    both = regs.deactivate_holding(
        "unregistered", at(1), token="ExponentPushToken[laptop]", device="elsewhere"
    )
    assert both == []  # both must match
    assert ids(regs.active_holding(["laptop"], [])) == {"t3"}


def test_a_logout_turns_off_only_that_users_registration_of_the_device(backend: Backend):
    backend.seed("tokens", reg("t1", "ann", "phone"), reg("t2", "ann", "tablet"))
    regs = backend.creator.registrations
    assert regs.deactivate_login("bob", "phone", "unregistered (logout)", at(1)) == []
    assert regs.deactivate_login("ann", "phone", "unregistered (logout)", at(1)) == off(
        ("t1", "ann")
    )
    assert ids(regs.active_holding(["phone", "tablet"], [])) == {"t2"}


def test_an_erasure_turns_off_then_deletes_every_registration_of_the_user(backend: Backend):
    backend.seed(
        "tokens",
        reg("t1", "ann", "phone"),
        reg("t2", "ann", "tablet", active=False),
        reg("t3", "bob", "laptop"),
    )
    regs = backend.creator.registrations
    assert regs.deactivate_of_user("ann", "user erased", at(1)) == off(("t1", "ann"))
    assert regs.delete_of_user("ann") == 2
    assert regs.of_user("ann") == []
    assert ids(regs.of_user("bob")) == {"t3"}
    assert regs.delete_of_user("ann") == 0


def test_what_a_change_created_for_users_erased_meanwhile_goes_and_nothing_else(backend: Backend):
    backend.seed(
        "tokens",
        reg("t1", "ann", "phone"),
        reg("t2", "ann", "tablet"),
        reg("t3", "bob", "laptop"),  # named, but of a user not erased
    )
    regs = backend.creator.registrations
    turned = regs.deactivate_ids_of(["t1", "t3"], ["ann"], "user erased meanwhile", at(1))
    assert turned == off(("t1", "ann"))
    assert regs.delete_ids_of(["t1", "t3"], ["ann"]) == 1
    assert ids(regs.of_user("ann")) == {"t2"}
    assert ids(regs.active_holding(["laptop"], [])) == {"t3"}


def test_a_deactivation_stamps_the_users_who_lost_a_registration(backend: Backend):
    backend.seed("tokens", reg("t1", "ann", "phone"), {**reg("t2", "x", "tablet"), "userId": 7})
    regs, changes = backend.creator.registrations, backend.creator.changes
    turned = regs.deactivate(["t1", "t2"], "token replaced", at(100))
    assert tokens.stamped(changes, turned, at(100)) == turned
    assert changed_in(changes, at(100)) == {"ann"}  # a user id that is no string: no one


# -- the change log and the counters an erasure removes ----------------------------------------
def test_the_change_log_says_who_changed_and_who_was_erased_allowing_for_skew(backend: Backend):
    changes = backend.creator.changes
    changes.record(["ann", "bob"], at(0))
    changes.record(["cy"], at(100), erased=True)
    changes.record(["cy"], at(200))  # a later stamp keeps the erasure
    assert changes.changed_since(at(150)) == {"cy"}
    assert changed_in(changes, at(100) + CHANGE_SKEW) == {"cy"}
    assert erased_in(changes, ["ann", "cy", "nobody"], at(100) + CHANGE_SKEW) == {"cy"}
    assert changes.erased_since(["cy"], at(101)) == set()
    assert changes.erased_since([], at(0)) == set()


def test_an_erasure_deletes_the_users_counters_those_without_their_user_included(
    backend: Backend,
):
    backend.seed(
        "counters",
        {"_id": "ann:2026-03-01", "count": 2, "userId": "ann", "at": at(0)},
        {"_id": "ann:2026-02-28", "count": 1},  # written before counters carried their user
        {"_id": "ann:b:2026-03-01", "count": 1},  # user "ann:b", by the last colon
        {"_id": "bob:2026-03-01", "count": 1, "userId": "bob", "at": at(0)},
    )
    changes = backend.creator.changes
    assert changes.erase_counters("ann") == 2
    assert backend.raw("counters", "ann:2026-03-01") is None
    assert backend.raw("counters", "ann:2026-02-28") is None
    kept = backend.raw("counters", "ann:b:2026-03-01")
    assert kept is not None and kept["userId"] == "ann:b"
    assert backend.raw("counters", "bob:2026-03-01") is not None
    assert changes.erase_counters("ann") == 0
