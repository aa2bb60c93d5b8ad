"""Suite-wide pytest hooks: everything under tests/integration gets the `integration` marker;
under ``--dist loadfile`` (`make test`) the workers take the longest files first
(tests/scheduling.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.scheduling import LongestFirst

INTEGRATION_DIR = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LongestFirst | None:
    """``--dist loadfile``: loadfile's units, taken longest first; other modes: xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    return LongestFirst(config, log)
