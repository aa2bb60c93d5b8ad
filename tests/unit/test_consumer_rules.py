"""The consumer's rules on the memory twin with a fake clock: nothing waits for a due instant.

Each test delivers wake-ups to the consumer's intake, moves the clock and runs what is due
(see consumer_rig.py); pushes reach the devstack Expo fake over loopback. The real-service
drills (kill -9, pauses, poison, outages) stay in tests/integration.
"""

from __future__ import annotations

import datetime as dt
import logging

from shared.domain.messages import outcome_unknown
from shared.errors import TransientError
from tests.unit.consumer_rig import T0, make_rig

LEAD = dt.timedelta(seconds=2)
MS = dt.timedelta(milliseconds=1)


def test_a_message_is_held_until_its_exact_due_instant_then_sent_once_and_acked():
    with make_rig() as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=60)
        doc = rig.message("u1", due)
        (frame,) = rig.deliver([doc])
        assert rig.run_until(due - LEAD - MS) == 0  # not even prepared yet
        assert rig.run_until(due - LEAD) == 1  # prepared: guarded, held
        assert rig.tables.get("guards", doc["_id"])["owner"] == "cons-rig"
        assert rig.run_until(due - MS) == 0 and rig.pushes() == []
        assert rig.run_until(due) == 1
        assert [p["to"] for p in rig.pushes()] == ["ExponentPushToken[u1]"]
        assert rig.status(doc["_id"]) == ("success", "accepted by Expo")
        assert rig.broker.acked == [frame.message_id]


def test_intent_withdrawn_after_preparation_is_rechecked_at_send_time_and_cancelled():
    with make_rig() as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=30)
        doc = rig.message("u1", due)
        rig.deliver([doc])
        rig.run_until(due - LEAD)
        rig.clock.set(due - dt.timedelta(milliseconds=500))
        rig.change("users", "u1", prefs={"enabled": False})
        rig.run_until(due)
        assert rig.pushes() == []
        assert rig.status(doc["_id"]) == ("cancelled", "user turned notifications off")


def test_a_token_deactivated_before_the_due_instant_cancels_with_its_reason():
    with make_rig() as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=30)
        doc = rig.message("u1", due)
        rig.deliver([doc])
        rig.run_until(due - LEAD)
        rig.change("tokens", "tok-u1", isActive=False, deactivationReason="token replaced")
        rig.run_until(due)
        assert rig.pushes() == []
        assert rig.status(doc["_id"]) == ("cancelled", "token no longer active (token replaced)")


def test_a_wakeup_that_arrives_past_the_grace_window_ends_is_missed_with_a_reason():
    with make_rig() as rig:
        rig.user("u1")
        grace = rig.settings.grace_seconds("meal")
        due = T0 - dt.timedelta(seconds=grace + 5)
        doc = rig.message("u1", due)
        rig.deliver([doc])
        rig.run_until(T0)
        assert rig.pushes() == []
        status, reason = rig.status(doc["_id"])
        assert status == "is_missed"
        assert reason == f"{grace + 5:.0f} s late, grace {grace:.0f} s"


def test_the_send_guard_keeps_a_second_copy_of_a_wakeup_from_sending_again():
    with make_rig() as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=30)
        doc = rig.message("u1", due)
        rig.deliver([doc])
        rig.deliver([doc])  # the broker fired the same wake-up twice
        rig.run_until(due)
        assert len(rig.pushes()) == 1
        rig.deliver([doc], redelivered=True)  # and once more after it was sent
        rig.run_until(due + dt.timedelta(seconds=1))
        assert len(rig.pushes()) == 1
        assert rig.status(doc["_id"])[0] == "success"
        assert len(rig.broker.acked) == 3  # every copy is acked, none is left hanging


def test_a_message_guarded_by_another_live_consumer_is_left_to_it():
    with make_rig() as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=30)
        doc = rig.message("u1", due)
        rig.tables.put("guards", {"_id": doc["_id"], "owner": "cons-other", "at": T0})
        rig.deliver([doc])
        rig.run_until(due)
        assert rig.pushes() == []
        assert rig.status(doc["_id"]) == ("pending", None)


def test_a_device_not_registered_ticket_fails_the_message_and_deactivates_the_token():
    with make_rig(dead_at_ticket=["ExponentPushToken[u1]"]) as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=30)
        doc = rig.message("u1", due)
        rig.deliver([doc])
        rig.run_until(due)
        assert rig.status(doc["_id"])[0] == "failed"
        token = rig.tables.get("tokens", "tok-u1")
        assert token is not None and token["isActive"] is False
        assert "u1" in rig.tables.changes  # stamped: the user's other pending messages recheck


def test_the_daily_cap_lets_the_first_through_and_cancels_the_rest_with_the_reason():
    with make_rig() as rig:
        rig.user("u1", cap=1)
        due = T0 + dt.timedelta(seconds=30)
        first = rig.message("u1", due)
        second = rig.message("u1", due + dt.timedelta(seconds=10), label="dinner")
        second_id = second["_id"]
        rig.deliver([first, second])
        rig.run_until(due + dt.timedelta(seconds=10))
        assert len(rig.pushes()) == 1
        assert rig.status(first["_id"])[0] == "success"
        assert rig.status(second_id) == ("cancelled", f"daily cap of 1 reached for {due.date()}")


def test_a_redelivered_wakeup_takes_over_a_stopped_consumers_guard_and_sends_once():
    with make_rig() as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=30)
        doc = rig.message("u1", due)
        rig.tables.put("guards", {"_id": doc["_id"], "owner": "cons-dead", "at": T0})
        rig.deliver([doc], redelivered=True)  # its consumer lost the broker session
        rig.run_until(due)
        assert len(rig.pushes()) == 1 and rig.status(doc["_id"])[0] == "success"
        guard = rig.tables.get("guards", doc["_id"])
        assert guard is not None
        assert (guard["owner"], guard["takenOverFrom"]) == ("cons-rig", "cons-dead")
        assert rig.tables.fences["cons-dead"]["by"] == "cons-rig"  # fenced before the takeover


def test_what_a_stopped_consumer_may_have_sent_ends_failed_outcome_unknown_and_is_not_resent():
    with make_rig() as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=30)
        doc = rig.message("u1", due)
        rig.tables.put("guards", {"_id": doc["_id"], "owner": "cons-dead", "at": T0})
        rig.tables.put(
            "attempts",
            {"_id": "cons-dead:1", "consumer": "cons-dead", "at": T0, "ids": [doc["_id"]]},
        )
        rig.deliver([doc], redelivered=True)
        rig.run_until(due)
        assert rig.pushes() == []
        assert rig.status(doc["_id"]) == ("failed", outcome_unknown("cons-dead"))


def test_a_sent_batch_is_one_info_line_with_its_category_count_and_lateness(caplog):
    caplog.set_level(logging.INFO)
    with make_rig() as rig:
        rig.user("u1")
        rig.user("u2")
        due = T0 + dt.timedelta(seconds=60)
        docs = [rig.message("u1", due), rig.message("u2", due)]
        rig.deliver(docs)
        rig.run_until(due)
        assert len(rig.pushes()) == 2
    said = [r.getMessage() for r in caplog.records]
    assert any("sent 2 meal" in s and "ms late" in s for s in said), said


def test_a_redelivered_copy_never_takes_over_a_guard_this_consumer_holds_itself():
    """Chaos seed 1 (60 min): one consumer sent the same wake-up's messages twice, 258 ms
    apart: its second copy of the wake-up (redelivered) took over the guards its first copy
    had taken and sent with, before that send's outcome reached the message."""
    with make_rig() as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=30)
        doc = rig.message("u1", due)
        # What the first copy left: this consumer's guard; its outcome not merged yet.
        rig.tables.put("guards", {"_id": doc["_id"], "owner": "cons-rig", "at": T0})
        (frame,) = rig.deliver([doc], redelivered=True)
        rig.run_until(due)
        assert rig.pushes() == []
        guard = rig.tables.get("guards", doc["_id"])
        assert guard is not None and guard["owner"] == "cons-rig"
        assert "cons-rig" not in rig.tables.fences  # it never fences itself
        assert frame.message_id in rig.broker.acked


def test_a_preparation_retried_after_a_database_error_keeps_the_guards_it_took():
    """The retry of a preparation whose intent check failed once finds the guards it took on
    the first try: they are still its own, and the message is sent once."""
    with make_rig() as rig:
        rig.user("u1")
        due = T0 + dt.timedelta(seconds=30)
        doc = rig.message("u1", due)
        checks = rig.consumer.preparation.checks
        real, calls = checks.changed_since, []

        def failing_once(planned_ms: int) -> set[str]:
            calls.append(planned_ms)
            if len(calls) == 1:
                raise TransientError("database unavailable (injected)")
            return real(planned_ms)

        checks.changed_since = failing_once  # type: ignore[method-assign]
        rig.deliver([doc])
        rig.run_until(due)
        assert len(calls) >= 2  # failed once, then retried (and checked again at send time)
        assert len(rig.pushes()) == 1 and rig.status(doc["_id"])[0] == "success"
