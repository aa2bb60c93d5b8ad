"""The storage seam's contract for what the consumer needs: the same answers from the memory
twin (``backend`` in conftest.py) and from the MongoDB adapter (the same functions, run by
tests/integration/test_contract_mongo.py), so a rule tested on the twin holds on MongoDB."""

from __future__ import annotations

import datetime as dt

import pytest

from shared.domain.messages import Status
from shared.store.abc import Ending, Guard, Outcome
from tests.contract.backends import Backend

T0 = dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def message(mid: str, due: dt.datetime, status: str = "pending", deleted: bool = False) -> dict:
    """A message document; each its own reminder, as each occurrence is unique while pending."""
    return {
        "_id": mid,
        "status": status,
        "isDeleted": deleted,
        "scheduledAt": due,
        "userId": "u",
        "notificationTokenId": "t",
        "category": "meal",
        "label": mid,
        "reminderId": f"rem-{mid}",
    }


# -- messages ----------------------------------------------------------------------------------
def test_pending_ids_are_the_pending_undeleted_messages_due_within_the_window(backend: Backend):
    backend.seed(
        "messages",
        message("in", at(10)),
        message("edge", at(20)),
        message("late", at(21)),
        message("sent", at(10), status="success"),
        message("deleted", at(10), deleted=True),
    )
    assert backend.stores.messages.pending_ids(at(10), at(20)) == {"in", "edge"}


def test_an_ending_applies_only_to_a_message_still_as_expected(backend: Backend):
    backend.seed("messages", message("m1", at(0)), message("m2", at(0), status="success"))
    msgs = backend.stores.messages
    first = Ending("m1", Status.CANCELLED, "token replaced", at(1), fields={"consumer": "c1"})
    assert msgs.end([first, Ending("m2", Status.FAILED, "late", at(1))]) == 1
    assert msgs.end([Ending("m1", Status.FAILED, "second writer", at(2))]) == 0
    doc = msgs.get("m1")
    assert doc is not None
    assert (doc["status"], doc["reason"], doc["finishedAt"], doc["consumer"]) == (
        "cancelled",
        "token replaced",
        at(1),
        "c1",
    )
    assert msgs.statuses(["m1", "m2", "nope"]) == {"m1": "cancelled", "m2": "success"}


def test_an_outcome_merged_twice_changes_nothing_the_second_time(backend: Backend):
    backend.seed("messages", message("m1", at(0)))
    msgs = backend.stores.messages
    fields = {"status": "success", "finishedAt": at(1), "ticketId": "t1"}
    msgs.apply([Outcome("m1", at(1), fields)])
    msgs.set_fields([("m1", {"receipt.state": "ok"})])  # written since, e.g. by the receipts
    msgs.apply([Outcome("m1", at(1), {**fields, "receipt": {"state": "pending"}})])
    doc = msgs.get("m1")
    assert doc is not None and doc["ticketId"] == "t1" and doc["receipt"] == {"state": "ok"}


def test_receipts_due_are_the_pending_receipts_whose_check_time_has_come(backend: Backend):
    backend.seed("messages", message("a", at(0)), message("b", at(0)), message("c", at(0)))
    msgs = backend.stores.messages
    msgs.set_fields(
        [
            ("a", {"receipt.state": "pending", "receipt.checkAfter": at(60)}),
            ("b", {"receipt.state": "pending", "receipt.checkAfter": at(120)}),
            ("c", {"receipt.state": "ok", "receipt.checkAfter": at(0)}),
        ]
    )
    assert [d["_id"] for d in msgs.receipts_due(at(60), 10)] == ["a"]
    assert len(msgs.receipts_due(at(600), 1)) == 1


# -- guards, fences, attempt records -----------------------------------------------------------
def test_a_guard_is_taken_once_and_released_only_by_its_holder(backend: Backend):
    g = backend.stores.guards
    assert g.take(["m1", "m2"], "c1", at(0), wakeup="w1") == {"m1", "m2"}
    assert g.take(["m2", "m3"], "c2", at(1)) == {"m3"}
    g.release(["m1", "m3"], "c1")  # m3 is c2's: it stays
    assert g.holder("m1") is None
    assert g.holder("m3") == Guard("m3", "c2", at(1), None)
    held = g.holder("m2")
    assert held is not None and (held.owner, held.wakeup) == ("c1", "w1")


def test_a_takeover_is_a_compare_and_set_only_one_taker_wins(backend: Backend):
    g = backend.stores.guards
    g.take(["m1"], "dead", at(0))
    seen = g.holder("m1")
    assert seen is not None
    assert g.take_over(seen, "c1", at(5), "w2") is True
    assert g.take_over(seen, "c2", at(6), "w3") is False  # what it saw is gone
    now = g.holder("m1")
    assert now is not None and (now.owner, now.taken_over_from) == ("c1", "dead")


def test_a_fence_names_who_set_it_and_attempt_records_name_what_may_have_left(backend: Backend):
    g = backend.stores.guards
    assert g.fenced_by("c1") is None
    g.fence("c1", "c2", at(0))
    assert g.fenced_by("c1") == "c2"
    g.record_attempt("c1:a", "c1", at(0), ["m1", "m2"])
    g.record_attempt("c1:b", "c1", at(1), ["m3"])
    g.record_attempt("c9:a", "c9", at(1), ["m4"])
    assert g.maybe_sent("c1") == {"m1", "m2", "m3"}
    g.drop_attempts(["c1:a"])
    assert g.maybe_sent("c1") == {"m3"}


# -- journal -----------------------------------------------------------------------------------
def test_a_journal_document_added_twice_is_kept_once_as_first_written(backend: Backend):
    j = backend.stores.journal
    j.add({"_id": "j1", "consumer": "c1", "at": at(0), "packed": "first"})
    j.add({"_id": "j1", "consumer": "c1", "at": at(0), "packed": "retry"})
    j.add({"_id": "j2", "consumer": "c2", "at": at(100), "packed": "x"})
    assert [d["packed"] for d in j.left("c1")] == ["first"]
    assert [d["_id"] for d in j.left(before=at(50))] == ["j1"]
    j.delete(["j1"])
    assert [d["_id"] for d in j.left()] == ["j2"]


# -- intent-change log, caps, current documents -------------------------------------------------
def test_the_change_log_answers_who_changed_and_who_was_erased_since(backend: Backend):
    log = backend.stores.changes
    log.record(["u1", "u2"], at(0))
    log.record(["u3"], at(10), erased=True)
    log.record(["u3"], at(20))  # a later stamp keeps the erasure
    assert log.changed_since(at(5)) == {"u3"}
    assert log.changed_since(at(0)) == {"u1", "u2", "u3"}


def test_a_cap_counter_never_reserves_past_its_limit_and_refunds_once(backend: Backend):
    c = backend.stores.counters
    assert c.reserve("u:2026-03-01", "u", 2, 3, at(0)) is True
    assert c.reserve("u:2026-03-01", "u", 2, 3, at(1)) is False  # 4 > 3
    assert c.reserve("u:2026-03-01", "u", 1, 3, at(1)) is True
    assert c.count("u:2026-03-01") == 3
    c.refund([("u:2026-03-01", "m1"), ("nobody:2026-03-01", "m1")])
    c.refund([("u:2026-03-01", "m1")])
    assert c.count("u:2026-03-01") == 2
    assert c.count("nobody:2026-03-01") == 0


def test_current_users_and_reminders_are_read_by_id(backend: Backend):
    backend.seed("users", {"_id": "u1", "timezone": "UTC"})
    backend.seed("reminders", {"_id": "r1", "userId": "u1"})
    assert set(backend.stores.current.users(["u1", "u2"])) == {"u1"}
    assert backend.stores.current.reminders(["r1"])["r1"]["userId"] == "u1"


# -- tokens ------------------------------------------------------------------------------------
def token(tid: str, active: bool = True) -> dict:
    return {"_id": tid, "userId": f"user-{tid}", "token": f"T[{tid}]", "isActive": active}


def test_deactivation_turns_off_only_active_registrations_and_says_which(backend: Backend):
    backend.seed("tokens", token("t1"), token("t2", active=False))
    off = backend.stores.tokens.deactivate(["t1", "t2", "t3"], "DeviceNotRegistered", at(0))
    assert off == [{"_id": "t1", "userId": "user-t1"}]
    assert backend.stores.tokens.deactivate(["t1"], "again", at(1)) == []
    doc = backend.stores.tokens.by_ids(["t1"])["t1"]
    assert (doc["isActive"], doc["deactivationReason"]) == (False, "DeviceNotRegistered")


def test_a_failure_counts_once_per_message_and_not_after_a_later_reset(backend: Backend):
    backend.seed("tokens", token("t1"))
    tokens = backend.stores.tokens
    first = tokens.count_failure("t1", at(10), "m1", at(11))
    assert first is not None and first["failureCount"] == 1
    again = tokens.count_failure("t1", at(10), "m1", at(12))  # merged twice
    assert again is not None and again["failureCount"] == 1
    assert tokens.failing() == {"t1"}
    assert tokens.reset_failures("t1", at(5), at(13)) is False  # a failure pushed later counts
    assert tokens.reset_failures("t1", at(20), at(21)) is True
    assert tokens.failing() == set()
    assert tokens.count_failure("t1", at(15), "m2", at(22)) is None  # pushed before the reset
    later = tokens.count_failure("t1", at(30), None, at(31))
    assert later is not None and later["failureCount"] == 1


@pytest.mark.parametrize("missing", ["t-none"])
def test_a_failure_of_an_unknown_registration_counts_nothing(backend: Backend, missing: str):
    assert backend.stores.tokens.count_failure(missing, at(0), "m1", at(0)) is None


# -- the registry of live senders ----------------------------------------------------------------
def test_a_sender_is_live_from_its_heartbeat_keeps_its_first_fields_and_leaves(backend: Backend):
    reg = backend.stores.senders
    reg.beat("c1", at(0), {"kind": "consumer", "categories": ["meal"]}, {"startedAt": at(0)})
    reg.beat("c1", at(5), {"kind": "consumer", "categories": ["mood"]}, {"startedAt": at(5)})
    reg.beat("r1", at(1), {"kind": "replay", "categories": []}, {"startedAt": at(1)})
    (c1,) = reg.live_since(at(2))
    assert (c1["_id"], c1["categories"], c1["startedAt"]) == ("c1", ["mood"], at(0))
    reg.leave("c1")
    assert [d["_id"] for d in reg.live_since(at(0))] == ["r1"]
