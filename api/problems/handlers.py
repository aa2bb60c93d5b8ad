"""The exception handlers: every error the API answers, as a problem, by one status table.

What raises what:
- ``ApiProblem`` (and ``invalid(...)``): the API's own refusals, with their status.
- The project's error tree, raised by the management code: ``InputError`` 422, ``NotFoundError``
  404, ``ConflictError`` 409, ``TransientError`` (and the driver's connection failures) 503 with
  ``Retry-After``.
- FastAPI's request validation 422 (400 for a body that is not JSON), Starlette's 404/405.
- Anything else is a bug: ``CatchAll`` (``api.problems.middleware``) logs it and answers 500.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pymongo.errors import ConnectionFailure
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from api.problems.model import (
    ApiProblem,
    dotted,
    invalid,
    problem_response,
    pydantic_field_error,
    status_title,
)
from shared.errors import ConflictError, NotFoundError, Overloaded, PermanentError, TransientError

log = logging.getLogger(__name__)

# The project's errors and the status each is answered with; the first match wins.
ERROR_STATUSES: tuple[tuple[type[BaseException], int], ...] = (
    (NotFoundError, 404),
    (ConflictError, 409),
    (PermanentError, 422),  # InputError among them
    (TransientError, 503),  # Overloaded among them
    (ConnectionFailure, 503),
)


def error_status(exc: BaseException) -> int | None:
    """The status ``exc`` is answered with: an ``ApiProblem``'s or an HTTP exception's own, the
    project's errors by ``ERROR_STATUSES``; None for anything else (a bug: answered 500)."""
    if isinstance(exc, ApiProblem):
        return exc.status
    if isinstance(exc, StarletteHTTPException):
        return exc.status_code
    for kind, status in ERROR_STATUSES:
        if isinstance(exc, kind):
            return status
    return None


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is answered 4xx: the request was refused, nothing of it was done."""
    status = error_status(exc)
    return status is not None and status < 500


def request_path(request: Request) -> str:
    """The raw (still percent-encoded) path of ``request``: always ASCII, whatever was sent."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    return str(raw.decode("ascii", "replace").split("?", 1)[0])


def _loc_name(loc: Sequence[Any]) -> tuple[str, str]:
    where = str(loc[0]) if loc else "body"
    rest = list(loc[1:])
    if where not in ("body", "path", "query", "header", "cookie"):
        where, rest = "body", list(loc)
    return where, dotted(rest) or where


async def on_api_problem(request: Request, exc: Exception) -> Response:
    """An ``ApiProblem`` as its problem answer."""
    assert isinstance(exc, ApiProblem)
    return problem_response(
        request_path(request),
        exc.status,
        exc.detail,
        errors=exc.errors,
        slug=exc.slug,
        headers=exc.headers,
    )


async def on_validation(request: Request, exc: Exception) -> Response:
    """FastAPI's refused request: 400 for a body that is not JSON, else 422 naming each field."""
    assert isinstance(exc, RequestValidationError)
    errs = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errs):
        return problem_response(request_path(request), 400, "the body is not valid JSON")
    out = []
    for e in errs:
        where, name = _loc_name(e.get("loc", ()))
        out.append(pydantic_field_error(e, name, where))
    problem = invalid(out)
    return problem_response(request_path(request), 422, problem.detail, errors=out)


async def on_http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's HTTP exceptions (404, 405, 413...) as problems; a 404 for a path with a
    trailing slash names the path without it."""
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else status_title(exc.status_code)
    if exc.status_code == 404 and detail == "Not Found":
        path = request_path(request)
        detail = "no such resource"
        if len(path) > 1 and path.endswith("/"):  # no redirect: it would be http:// behind TLS
            detail = f"no such resource; without the trailing slash: {path.rstrip('/')}"
    return problem_response(
        request_path(request), exc.status_code, detail, headers=dict(exc.headers or {})
    )


async def on_project_error(request: Request, exc: Exception) -> Response:
    """The project's error tree, as the management code raises it, answered by
    ``ERROR_STATUSES``; anything else is raised again (``CatchAll`` answers it 500)."""
    status = error_status(exc)
    if status is None:
        raise exc  # not ours to answer: CatchAll logs it and answers 500
    if status != 503:
        return problem_response(request_path(request), status, str(exc))
    if isinstance(exc, Overloaded):  # our own refusal, said as it is; not logged each time
        return problem_response(request_path(request), 503, str(exc), headers={"Retry-After": "1"})
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    return problem_response(
        request_path(request),
        503,
        "the database or the broker is unavailable; try again shortly",
        headers={"Retry-After": "1"},
    )
