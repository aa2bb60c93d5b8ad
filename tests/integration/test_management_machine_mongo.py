"""The management state machine and its directed cases (tests/unit/test_management_machine.py)
on MongoDB, on the test stack: the machine with fewer examples, every collection emptied
between them."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.unit.management_machine import run_machine
from tests.unit.management_rig import Backend, mongo_backend
from tests.unit.test_management_machine import (  # noqa: F401  (run here on MongoDB)
    test_a_batch_handing_an_install_over_then_moving_its_user_plans_nothing_for_it,
    test_the_check_finds_a_message_planned_for_an_install_handed_over_earlier_in_a_batch,
)

MAX_EXAMPLES = 20


@pytest.fixture
def backend(db: Any, caplog: pytest.LogCaptureFixture) -> Backend:
    # The fake clock is years ahead of the database server's: the janitor says so every pass
    # (and goes by the server's, so it ends nothing the check compares).
    caplog.set_level(logging.ERROR, logger="creator.janitor")
    return mongo_backend(db)


@pytest.mark.timeout(900)
def test_management_keeps_exactly_the_current_versions_pending_on_mongodb(
    backend: Backend,
) -> None:
    run_machine(backend, MAX_EXAMPLES)
