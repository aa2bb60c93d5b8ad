"""The management state machine (tests/unit/test_management_machine.py) on MongoDB, on the test
stack: fewer examples, every collection emptied between them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.management_machine import run_machine
from tests.unit.management_rig import Backend, mongo_backend

MAX_EXAMPLES = 20


@pytest.fixture
def backend(db: Any) -> Backend:
    return mongo_backend(db)


@pytest.mark.timeout(900)
def test_management_keeps_exactly_the_current_versions_pending_on_mongodb(
    backend: Backend,
) -> None:
    run_machine(backend, MAX_EXAMPLES)
