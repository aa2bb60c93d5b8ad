"""Every store a family is assembled from has the methods, with the parameters, of its field's
Protocol: on MongoDB and in memory (``shared.store.families.assemble`` builds them from a
mapping, which mypy does not check field by field)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator
from typing import Any, get_type_hints

import pytest
from pymongo import MongoClient

from shared.store.memory import memory_creator_stores, memory_stores
from shared.store.mongo import consumer_stores, creator_stores


def _families() -> Iterator[tuple[str, object]]:
    client: MongoClient[dict[str, Any]] = MongoClient(connect=False)  # never connects
    database = client["families"]
    yield "mongo consumer", consumer_stores(database)
    yield "mongo creator", creator_stores(database)
    yield "memory consumer", memory_stores()
    yield "memory creator", memory_creator_stores()
    client.close()


def _members(protocol: type) -> dict[str, Any]:
    return {
        name: value
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


def _parameters(function: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize(("family", "stores"), list(_families()))
def test_each_store_of_a_family_has_its_protocols_methods(family: str, stores: object) -> None:
    hints = get_type_hints(type(stores))
    for field in dataclasses.fields(stores):  # type: ignore[arg-type]
        protocol, store = hints[field.name], getattr(stores, field.name)
        for name, member in _members(protocol).items():
            assert hasattr(type(store), name), f"{family}.{field.name} has no {name}"
            if isinstance(member, property):
                continue
            mine = getattr(type(store), name)
            assert _parameters(mine) == _parameters(member), f"{family}.{field.name}.{name}"
