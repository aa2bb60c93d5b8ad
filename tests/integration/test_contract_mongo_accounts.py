"""The accounts stores' contract suite (tests/contract/test_account_stores.py) on the MongoDB
adapter, on the test stack."""

from __future__ import annotations

from typing import Any

import pytest

from tests.contract.backends import Backend, mongo_backend
from tests.contract.test_account_stores import *  # noqa: F403  (the suite's test functions)


@pytest.fixture
def backend(db: Any) -> Backend:
    return mongo_backend(db)
