"""Management and planning as a state machine, on the in-memory twin with a fake clock: random
interleavings of users, logins, logouts, reminders, pauses, zone and category changes, erasures,
planning passes and batches, each step checked against an oracle (``management_machine``): the
store holds exactly the current version's occurrences pending, once each, for active
registrations only. The same tests run on MongoDB in
``tests/integration/test_management_machine_mongo.py`` (the machine with fewer examples)."""

from __future__ import annotations

import pytest

from creator.writers import batch
from creator.writers.batch import Login, UserChange
from tests.unit import management_model as mm
from tests.unit.management_machine import TOKENS, ManagementMachine, run_machine
from tests.unit.management_rig import Backend, machine_settings, memory_backend

MAX_EXAMPLES = 500


@pytest.fixture
def backend() -> Backend:
    return memory_backend()


def test_management_keeps_exactly_the_current_versions_pending(backend: Backend) -> None:
    run_machine(backend, MAX_EXAMPLES)


def handover_then_zone_change(backend: Backend) -> ManagementMachine:
    """Ana's device with a reminder planned; then one batch: Ben logs in on Ana's device, and
    Ana changes zone (issue 31: the zone change planned Ana's new version for the device)."""
    m = ManagementMachine(backend, machine_settings())
    m.planning_pass()
    m.change_zone("ana", "Asia/Kolkata")
    m.change_zone("ben", "UTC")
    m.login("ana", "d1", TOKENS[0])
    m.put_reminder("ana", "r1", mm.Content("meal", "lunch", "12:00"))
    m.exactly_the_current_versions_are_pending()
    m.apply_batch([Login("ben", "d1", TOKENS[1]), UserChange("ana", timezone="UTC")])
    return m


def test_a_batch_handing_an_install_over_then_moving_its_user_plans_nothing_for_it(
    backend: Backend,
) -> None:
    handover_then_zone_change(backend).exactly_the_current_versions_are_pending()


def test_the_check_finds_a_message_planned_for_an_install_handed_over_earlier_in_a_batch(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The oracle's own test: with the batch's rule for this order turned off (the defect's
    shape), the check names the message planned for the registration the login turned off."""
    monkeypatch.setattr(batch, "_zone_change_after_login", lambda *_: False)
    m = handover_then_zone_change(backend)
    with pytest.raises(AssertionError, match="not active while its version was current"):
        m.exactly_the_current_versions_are_pending()
