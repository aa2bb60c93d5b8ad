"""``ResourceRouter``: the resource routes declared by kind (a read, a write, a removal), so that
each kind's status, answer class and problem answers in the OpenAPI document are said once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter
from fastapi.types import DecoratedCallable

from api.problems import NO_CONTENT, READS, WRITES

Route = Callable[[DecoratedCallable], DecoratedCallable]


class ResourceRouter(APIRouter):
    """An ``APIRouter`` with one declaration per kind of resource route. A route that answers
    otherwise (a 201, other problems) is declared with the router's own methods."""

    def read(self, path: str, model: type[Any], summary: str) -> Route:
        """A GET answering ``model`` (200), or a problem of ``READS``."""
        return self.get(path, response_model=model, summary=summary, responses=READS)

    def write(
        self, path: str, model: type[Any], summary: str, method: Literal["PUT", "PATCH"] = "PUT"
    ) -> Route:
        """A PUT (or PATCH) of a JSON body answering ``model`` (200), or a problem of ``WRITES``."""
        return self.api_route(
            path, methods=[method], response_model=model, summary=summary, responses=WRITES
        )

    def remove(self, path: str, summary: str) -> Route:
        """A DELETE answered 204 with no body, or a problem of ``READS``."""
        return self.delete(path, summary=summary, **NO_CONTENT)
