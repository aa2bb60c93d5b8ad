"""The storage seam's contract for the creator's accounts stores (users, reminders, erasure):
the same answers from the memory twin (``backend`` in conftest.py) and from the MongoDB adapter
(the same functions, run by tests/integration/test_contract_mongo_accounts.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from shared.store.abc_accounts import StaleVersions, UserUpsert, VersionCancel
from shared.store.erasure import SCRUBBED
from tests.contract.backends import Backend

T0 = dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def user(uid: str, **fields: Any) -> dict[str, Any]:
    return {"_id": uid, "timezone": "UTC", "createdAt": at(-100), **fields}


def reminder(rid: str, uid: str = "u", **fields: Any) -> dict[str, Any]:
    return {
        "_id": rid,
        "userId": uid,
        "time": "08:00",
        "isDeleted": False,
        "version": 1,
        "createdAt": at(-50),
        **fields,
    }


def message(mid: str, due: dt.datetime, **fields: Any) -> dict[str, Any]:
    """A pending message of user ``u``'s reminder ``r`` (each its own token: unique while
    pending), with the text an erasure removes."""
    return {
        "_id": mid,
        "userId": "u",
        "reminderId": "r",
        "reminderVersion": 1,
        "notificationTokenId": f"t-{mid}",
        "scheduledAt": due,
        "plannedAt": at(-10),
        "status": "pending",
        "isDeleted": False,
        "title": "Pill",
        "body": "take it",
        "data": {"k": 1},
        "label": "pill",
        "token": "ExponentPushToken[x]",
        "timezone": "UTC",
        **fields,
    }


def status(backend: Backend, mid: str) -> tuple[Any, Any]:
    doc = backend.raw("messages", mid)
    assert doc is not None
    return doc["status"], doc.get("reason")


# -- users -------------------------------------------------------------------------------------
def test_an_upsert_creates_a_user_only_when_asked_and_answers_it_as_stored(backend: Backend):
    users = backend.creator.users
    update = {
        "$set": {"timezone": "Asia/Tashkent", "prefs.categories.meal": False, "updatedAt": at(1)},
        "$setOnInsert": {"createdAt": at(1), "bucket": 7},
    }
    assert users.upsert("u1", update, create=False) is None
    assert users.get("u1") is None
    created = users.upsert("u1", update, create=True)
    assert created == {
        "_id": "u1",
        "timezone": "Asia/Tashkent",
        "prefs": {"categories": {"meal": False}},
        "updatedAt": at(1),
        "createdAt": at(1),
        "bucket": 7,
    }
    later = {"$set": {"prefs.enabled": True}, "$setOnInsert": {"createdAt": at(2), "bucket": 8}}
    changed = users.upsert("u1", later, create=True)
    assert changed is not None and changed["createdAt"] == at(1) and changed["bucket"] == 7
    assert changed["prefs"] == {"categories": {"meal": False}, "enabled": True}


def test_a_user_read_with_fields_has_only_those_and_its_id(backend: Backend):
    backend.seed("users", user("u1", timezone="Europe/Berlin", dailyCap=3))
    users = backend.creator.users
    assert users.get("u1", ("timezone",)) == {"_id": "u1", "timezone": "Europe/Berlin"}
    assert users.get("u1") == user("u1", timezone="Europe/Berlin", dailyCap=3)
    assert users.get_many(["u1", "nobody"]) == {
        "u1": user("u1", timezone="Europe/Berlin", dailyCap=3)
    }


def test_many_upserts_answer_the_users_they_created(backend: Backend):
    backend.seed("users", user("old"))
    users = backend.creator.users
    sets = {"$set": {"timezone": "Asia/Tokyo"}, "$setOnInsert": {"createdAt": at(5)}}
    created = users.upsert_many(
        [
            UserUpsert("old", sets, True),
            UserUpsert("new", sets, True),
            UserUpsert("no", sets, False),
        ]
    )
    assert created == {"new"}
    assert users.upsert_many([]) == set()
    found = users.get_many(["old", "new", "no"])
    assert sorted(found) == ["new", "old"]
    assert found["old"]["timezone"] == "Asia/Tokyo" and found["old"]["createdAt"] == at(-100)
    assert found["new"] == {"_id": "new", "timezone": "Asia/Tokyo", "createdAt": at(5)}


def test_inserting_users_refuses_taken_ids_by_position(backend: Backend):
    backend.seed("users", user("taken"))
    users = backend.creator.users
    refused = users.insert_many([user("a", timezone="A"), user("taken"), user("a", timezone="B")])
    assert refused == {1, 2}
    stored = users.get("a")
    assert stored is not None and stored["timezone"] == "A"
    users.delete("a")
    users.delete("nobody")
    assert users.get("a") is None and users.get("taken") is not None


# -- reminders ---------------------------------------------------------------------------------
def test_a_users_reminders_leave_out_removed_ones_unless_asked(backend: Backend):
    unmarked = reminder("r4")
    del unmarked["isDeleted"]  # written by hand: not counted as a live reminder either
    backend.seed(
        "reminders",
        reminder("r1"),
        reminder("r2", isDeleted=True),
        reminder("r3", uid="other"),
        unmarked,
    )
    store = backend.creator.reminders
    assert [r["_id"] for r in store.of_user("u")] == ["r1"]
    assert sorted(r["_id"] for r in store.of_user("u", include_deleted=True)) == ["r1", "r2", "r4"]
    assert store.count_of_user("u") == 1 and store.count_of_user("nobody") == 0
    assert store.get("r2") == reminder("r2", isDeleted=True) and store.get("nope") is None
    assert sorted(store.get_many(["r1", "r3", "nope"])) == ["r1", "r3"]


def test_inserting_a_reminder_under_a_taken_id_is_refused(backend: Backend):
    store = backend.creator.reminders
    assert store.insert(reminder("r1")) is True
    assert store.insert(reminder("r1", uid="other")) is False
    assert store.insert_many([reminder("r2"), reminder("r1"), reminder("r3")]) == {1}
    assert sorted(store.get_many(["r1", "r2", "r3"])) == ["r1", "r2", "r3"]
    got = store.get("r1")
    assert got is not None and got["userId"] == "u"


def test_a_compare_and_set_applies_only_to_the_version_read(backend: Backend):
    backend.seed("reminders", reminder("r1", version=3), reminder("r2", uid="v"))
    store = backend.creator.reminders
    read = store.get("r1")
    assert read is not None
    assert store.compare_and_set(read, {"time": "09:00"}, at(1)) == 4
    assert store.compare_and_set(read, {"time": "10:00"}, at(2)) is None  # another got in first
    now = store.get("r1")
    assert now is not None
    assert (now["version"], now["time"], now["updatedAt"]) == (4, "09:00", at(1))
    # The same id at the same version, but another reminder (erased, and put again since).
    other = {**now, "createdAt": at(-49)}
    assert store.compare_and_set(other, {"time": "11:00"}, at(3)) is None
    assert store.compare_and_set(reminder("gone"), {}, at(3)) is None
    assert store.stamps(["r1", "r2", "gone"]) == {"r1": (4, at(-50)), "r2": (1, at(-50))}


def test_a_reminder_without_a_version_is_at_version_1(backend: Backend):
    unversioned = reminder("r1")
    del unversioned["version"]
    backend.seed("reminders", unversioned, {**unversioned, "_id": "r2"})
    store = backend.creator.reminders
    assert store.stamps(["r1"]) == {"r1": (1, at(-50))}
    assert store.compare_and_set(unversioned, {}, at(1)) == 2
    assert store.compare_and_set(unversioned, {}, at(2)) is None
    store.compare_and_set_many([{**unversioned, "_id": "r2"}], at(3))
    assert store.stamps(["r1", "r2"]) == {"r1": (2, at(-50)), "r2": (2, at(-50))}


def test_many_compare_and_sets_move_only_the_reminders_still_as_read(backend: Backend):
    backend.seed("reminders", reminder("r1"), reminder("r2"), reminder("r3"))
    store = backend.creator.reminders
    olds = [store.get(r) for r in ("r1", "r2", "r3")]
    assert store.compare_and_set(olds[1] or {}, {}, at(1)) == 2  # r2 changed meanwhile
    store.compare_and_set_many([o for o in olds if o is not None], at(2))
    assert {r: v for r, (v, _) in store.stamps(["r1", "r2", "r3"]).items()} == {
        "r1": 2,
        "r2": 2,
        "r3": 2,
    }
    r1 = store.get("r1")
    assert r1 is not None and r1["updatedAt"] == at(2)
    store.compare_and_set_many([], at(3))


def test_cancel_at_ends_only_pending_messages_of_the_versions_replaced(backend: Backend):
    backend.seed(
        "messages",
        message("v1", at(60)),
        message("v2", at(60), reminderVersion=2),  # planned from the new version already
        message("none", at(60), reminderVersion=None),
        message("text", at(60), reminderVersion="x"),  # not a number: not a later version
        message("other-time", at(120)),
        message("other-rem", at(60), reminderId="r9"),
        message("sent", at(60), status="success"),
        message("deleted", at(60), isDeleted=True),
    )
    store = backend.creator.reminders
    cancels = [VersionCancel("r", 1, [at(60)]), VersionCancel("r9", 1, [])]
    assert store.cancel_at(cancels, "reminder changed", at(1)) == 3
    assert store.cancel_at([], "reminder changed", at(1)) == 0
    assert status(backend, "v1") == ("cancelled", "reminder changed")
    assert status(backend, "none")[0] == status(backend, "text")[0] == "cancelled"
    for mid in ("v2", "other-time", "other-rem", "deleted"):
        assert status(backend, mid) == ("pending", None), mid
    assert status(backend, "sent") == ("success", None)
    doc = backend.raw("messages", "v1")
    assert doc is not None and doc["finishedAt"] == at(1)


def test_older_versions_pending_since_an_instant_end_cancelled(backend: Backend):
    backend.seed(
        "messages",
        message("v1", at(60)),
        message("v2", at(120), reminderVersion=2),
        message("v3", at(120), reminderVersion=3),
        message("early", at(-60)),
        message("theirs", at(60), userId="other"),
        message("none", at(60), reminderVersion=None),
    )
    store = backend.creator.reminders
    stale = StaleVersions("u", "r", 3, at(0))
    assert store.cancel_versions_before(stale, "reminder changed", at(5)) == 3
    for mid in ("v1", "v2", "none"):
        assert status(backend, mid) == ("cancelled", "reminder changed"), mid
    for mid in ("v3", "early", "theirs"):
        assert status(backend, mid) == ("pending", None), mid


def test_deleting_reminders_takes_only_the_users_named(backend: Backend):
    backend.seed(
        "reminders",
        reminder("a1", uid="a"),
        reminder("a2", uid="a"),
        reminder("b1", uid="b"),
        reminder("c1", uid="c"),
    )
    store = backend.creator.reminders
    assert store.delete(["a", "c"], ["a1", "b1"]) == 1  # b1 is not a's or c's
    assert sorted(store.get_many(["a1", "a2", "b1", "c1"])) == ["a2", "b1", "c1"]
    assert store.delete(["a"]) == 1
    assert store.delete(["nobody"]) == 0
    assert sorted(store.get_many(["a1", "a2", "b1", "c1"])) == ["b1", "c1"]


# -- erasure -----------------------------------------------------------------------------------
def _anonymised(backend: Backend, mid: str, pseudonym: str) -> None:
    doc = backend.raw("messages", mid)
    assert doc is not None
    assert doc["userId"] == pseudonym and doc["erasedAt"] == at(9), doc
    assert all(doc[k] is None for k in SCRUBBED), doc


def test_a_scrub_ends_what_could_still_go_and_anonymises_every_message(backend: Backend):
    backend.seed(
        "messages",
        message("pending", at(60)),
        message("missed", at(-60), status="is_missed"),
        message("sent", at(-120), status="success", reason=None),
        message("theirs", at(60), userId="other"),
    )
    ended, anonymised, pseudonym = backend.creator.erasure.scrub("u", at(9))
    assert (ended, anonymised) == (2, 3)
    assert pseudonym.startswith("erased-") and len(pseudonym) == len("erased-") + 16
    assert status(backend, "pending") == status(backend, "missed") == ("cancelled", "user erased")
    assert status(backend, "sent") == ("success", None)
    for mid in ("pending", "missed", "sent"):
        _anonymised(backend, mid, pseudonym)
    theirs = backend.raw("messages", "theirs")
    assert theirs is not None and theirs["userId"] == "other" and theirs["title"] == "Pill"
    assert backend.creator.erasure.scrub("u", at(10))[:2] == (0, 0)


def test_a_scrub_of_what_was_planned_before_an_instant_leaves_what_came_after(backend: Backend):
    backend.seed(
        "messages",
        message("before", at(60), plannedAt=at(-10)),
        message("edge", at(61), plannedAt=at(0)),
        message("after", at(62), plannedAt=at(1)),
        message("unknown", at(63), plannedAt=None),
    )
    ended, anonymised, pseudonym = backend.creator.erasure.scrub("u", at(9), planned_before=at(0))
    assert (ended, anonymised) == (2, 2)
    _anonymised(backend, "before", pseudonym)
    _anonymised(backend, "edge", pseudonym)
    for mid in ("after", "unknown"):
        assert status(backend, mid) == ("pending", None), mid


def test_a_scrub_by_ids_ends_and_anonymises_only_those(backend: Backend):
    backend.seed(
        "messages",
        message("m1", at(60)),
        message("m2", at(-60), status="failed", reason="outcome unknown"),
        message("m3", at(60)),
    )
    erasure = backend.creator.erasure
    ended, pseudonym = erasure.scrub_ids(["m1", "m2", "nope"], at(9))
    assert ended == 1
    assert status(backend, "m1") == ("cancelled", "user erased")
    assert status(backend, "m2") == ("failed", "outcome unknown")
    _anonymised(backend, "m1", pseudonym)
    _anonymised(backend, "m2", pseudonym)
    assert status(backend, "m3") == ("pending", None)
    none, other = erasure.scrub_ids([], at(9))
    assert none == 0 and other.startswith("erased-") and other != pseudonym


def test_incarnations_say_which_user_holds_each_id_now(backend: Backend):
    backend.seed("users", user("a"), user("b", createdAt=at(5)), {"_id": "c", "timezone": "UTC"})
    found = backend.creator.erasure.incarnations(["a", "b", "c", "gone"])
    assert found == {"a": at(-100), "b": at(5), "c": None}
    assert backend.creator.erasure.incarnations([]) == {}


def test_planned_from_finds_a_users_messages_by_token_or_reminder(backend: Backend):
    backend.seed(
        "messages",
        message("m1", at(60), notificationTokenId="t1"),
        message("m2", at(61), notificationTokenId="t2", reminderId="r2"),
        message("m3", at(62), notificationTokenId="t1", userId="v"),
        message("m4", at(63), notificationTokenId="t1", userId="w"),
    )
    erasure = backend.creator.erasure
    by_token = erasure.planned_from(["u", "v"], "notificationTokenId", ["t1", "t9"])
    assert {u: sorted(ids) for u, ids in by_token.items()} == {"u": ["m1"], "v": ["m3"]}
    assert erasure.planned_from(["u"], "reminderId", ["r2"]) == {"u": ["m2"]}
    assert erasure.planned_from(["u"], "reminderId", ["r9"]) == {}


def test_forgetting_a_users_requests_deletes_only_theirs(backend: Backend):
    backend.seed(
        "idempotency",
        {"_id": "k1", "userId": "u", "answer": {"label": "pill"}},
        {"_id": "k2", "userId": "u"},
        {"_id": "k3", "userId": "other"},
    )
    assert backend.creator.erasure.forget_requests("u") == 2
    assert backend.creator.erasure.forget_requests("u") == 0
    assert backend.raw("idempotency", "k1") is None and backend.raw("idempotency", "k2") is None
    assert backend.raw("idempotency", "k3") is not None
