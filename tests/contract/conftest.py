"""The contract suite on the memory twin (on MongoDB: tests/integration/test_contract_mongo.py)."""

from __future__ import annotations

import pytest

from tests.contract.backends import Backend, memory_backend


@pytest.fixture
def backend() -> Backend:
    return memory_backend()
