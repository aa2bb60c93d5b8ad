"""Errors as RFC 9457 problem details (``application/problem+json``), for every answer >= 400.

- ``model``: the problem shape, ``ApiProblem`` and the one table of statuses (slug and title).
- ``handlers``: the exception handlers, with the one table of which error gets which status.
- ``middleware``: the ASGI middleware (catch-all 500, request shape, body size).
- ``openapi``: the problem answers a route declares in the OpenAPI document.

Every name is importable from ``api.problems`` itself.
"""

from __future__ import annotations

from api.problems.handlers import (
    ERROR_STATUSES,
    error_status,
    is_refusal,
    on_api_problem,
    on_http_exception,
    on_project_error,
    on_validation,
    request_path,
)
from api.problems.middleware import (
    BodyLimit,
    BodyTooLarge,
    CatchAll,
    HttpMiddleware,
    ResponseWatch,
    raw_path,
    request_shape_problem,
)
from api.problems.model import (
    MEDIA_TYPE,
    SLUG_TITLES,
    STATUSES,
    TYPE_BASE,
    ApiProblem,
    InvalidField,
    Kind,
    Problem,
    dotted,
    field_error,
    invalid,
    problem_body,
    problem_response,
    pydantic_field_error,
    status_title,
)
from api.problems.openapi import NO_CONTENT, READS, WRITES, problem_responses

__all__ = [
    "ERROR_STATUSES",
    "MEDIA_TYPE",
    "NO_CONTENT",
    "READS",
    "SLUG_TITLES",
    "STATUSES",
    "TYPE_BASE",
    "WRITES",
    "ApiProblem",
    "BodyLimit",
    "BodyTooLarge",
    "CatchAll",
    "HttpMiddleware",
    "InvalidField",
    "Kind",
    "Problem",
    "ResponseWatch",
    "dotted",
    "error_status",
    "field_error",
    "invalid",
    "is_refusal",
    "on_api_problem",
    "on_http_exception",
    "on_project_error",
    "on_validation",
    "problem_body",
    "problem_response",
    "problem_responses",
    "pydantic_field_error",
    "raw_path",
    "request_path",
    "request_shape_problem",
    "status_title",
]
