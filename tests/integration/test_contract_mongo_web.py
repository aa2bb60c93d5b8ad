"""The contract suite of the HTTP API's own records (tests/contract/test_web_stores.py) on the
MongoDB adapter, on the test stack."""

from __future__ import annotations

from typing import Any

import pytest

from tests.contract.backends import WebBackend, mongo_web_backend
from tests.contract.test_web_stores import *  # noqa: F403  (the suite's test functions)


@pytest.fixture
def web(db: Any) -> WebBackend:  # replaces the suite's memory fixture of the same name
    return mongo_web_backend(db)
