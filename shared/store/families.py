"""Building a family of stores (``ConsumerStores``, ``CreatorStores``) from one backend's
adapter classes, every one made on the same source (a MongoDB database, the twin's tables).

Each backend names its classes once, in a mapping of field to part; ``assemble`` makes them.
``tests/unit/test_store_families.py`` checks that every part has the methods, with the
parameters, of its field's Protocol (the check mypy made when each field was written out)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

Source = TypeVar("Source")
Family = TypeVar("Family")

Parts = Mapping[str, Callable[[Source], object]]
"""Field name to what makes that field's store from the source (an adapter class)."""


def assemble(family: Callable[..., Family], source: Source, parts: Parts[Source]) -> Family:
    """``family`` with each field made by its part from ``source``. A field without a part, or
    a part without a field, raises ``TypeError`` (from the dataclass)."""
    return family(**{name: make(source) for name, make in parts.items()})
