"""The API's problems: one table says which error is which status, for every path that answers."""

from __future__ import annotations

import asyncio
import json

import pytest
from pymongo.errors import AutoReconnect
from starlette.exceptions import HTTPException
from starlette.requests import Request

from api.problems import (
    ERROR_STATUSES,
    STATUSES,
    ApiProblem,
    error_status,
    is_refusal,
    on_project_error,
    problem_body,
    problem_responses,
)
from shared.errors import (
    ConflictError,
    InputError,
    NotFoundError,
    Overloaded,
    PermanentError,
    TransientError,
    TzpushError,
)

SCOPE = {"type": "http", "method": "GET", "path": "/v1/users/u", "headers": []}
PROJECT_ERRORS = [
    (NotFoundError("no user"), 404),
    (ConflictError("taken"), 409),
    (InputError("bad zone"), 422),
    (PermanentError("cannot"), 422),
    (Overloaded("queue full"), 503),
    (TransientError("db down"), 503),
    (AutoReconnect("db down"), 503),
]


@pytest.mark.parametrize(("exc", "status"), PROJECT_ERRORS)
def test_each_project_error_is_answered_with_the_status_of_the_one_table(
    exc: Exception, status: int
) -> None:
    assert error_status(exc) == status
    assert is_refusal(exc) == (status < 500)
    answered = asyncio.run(on_project_error(Request(SCOPE), exc))
    assert answered.status_code == status
    body = json.loads(bytes(answered.body))
    assert body["status"] == status and body["type"] == "/problems/" + STATUSES[status].slug


def test_what_the_table_does_not_name_is_not_answered_but_raised() -> None:
    assert error_status(ValueError("bug")) is None and not is_refusal(ValueError("bug"))
    assert error_status(TzpushError("unclassified")) is None
    with pytest.raises(TzpushError):
        asyncio.run(on_project_error(Request(SCOPE), TzpushError("unclassified")))


def test_the_api_own_refusals_keep_their_status() -> None:
    assert error_status(ApiProblem(413, "too large")) == 413 and is_refusal(ApiProblem(413, "x"))
    assert error_status(HTTPException(405)) == 405
    assert error_status(ApiProblem(503, "not ready", slug="not-ready")) == 503


def test_every_status_the_table_maps_to_has_a_slug_and_a_title() -> None:
    for _, status in ERROR_STATUSES:
        assert status in STATUSES
    for status, kind in STATUSES.items():
        body = problem_body(status, "why")
        assert body == {
            "type": "/problems/" + kind.slug,
            "title": kind.title,
            "status": status,
            "detail": "why",
        }
        assert problem_responses(status)[status]["description"] == kind.title
    assert problem_body(599, "odd")["title"] == "Error"
    assert problem_body(409, "x", slug="idempotency-key-in-use")["title"] == (
        "Idempotency-Key in use"
    )
