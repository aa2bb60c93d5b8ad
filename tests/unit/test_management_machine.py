"""Management and planning as a state machine, on the in-memory twin with a fake clock: random
interleavings of users, logins, logouts, reminders, pauses, zone and category changes, erasures,
planning passes and batches, each step checked against an oracle (``management_machine``): the
store holds exactly the current version's occurrences pending, once each, for active
registrations only. The same machine runs on MongoDB in
``tests/integration/test_management_machine_mongo.py`` (fewer examples)."""

from __future__ import annotations

import pytest

from tests.unit.management_machine import run_machine
from tests.unit.management_rig import Backend, memory_backend

MAX_EXAMPLES = 500


@pytest.fixture
def backend() -> Backend:
    return memory_backend()


@pytest.mark.xfail(raises=RuntimeError, strict=True, reason="the writers run on MongoDB only")
def test_management_keeps_exactly_the_current_versions_pending(backend: Backend) -> None:
    run_machine(backend, MAX_EXAMPLES)
