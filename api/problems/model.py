"""The problem model (RFC 9457, ``application/problem+json``) and the one table of statuses.

One shape everywhere: ``type``, ``title``, ``status``, ``detail``, ``instance`` and, for
refused input, ``errors``: one entry per invalid field with its ``name`` (a dotted path such as
``quietHours.start`` or ``items.3.reminder.at``), where it was (``body``, ``path``, ``query``,
``header``) and a ``message`` that names the value (``unknown time zone 'Europe/Berln'``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, Field
from starlette.responses import JSONResponse, Response

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "/problems/"  # a relative URI; docs/api.md says what each type means


class Kind(NamedTuple):
    """What a status is called: the last part of its problem ``type``, and its ``title``."""

    slug: str
    title: str


STATUSES: dict[int, Kind] = {
    400: Kind("bad-request", "Bad request"),
    401: Kind("unauthorized", "Unauthorized"),
    403: Kind("forbidden", "Forbidden"),
    404: Kind("not-found", "Not found"),
    405: Kind("method-not-allowed", "Method not allowed"),
    409: Kind("conflict", "Conflict"),
    413: Kind("too-large", "Content too large"),
    415: Kind("unsupported-media-type", "Unsupported media type"),
    422: Kind("invalid-input", "Invalid input"),
    429: Kind("too-many-requests", "Too many requests"),
    500: Kind("internal", "Internal error"),
    503: Kind("unavailable", "Service unavailable"),
}
# Kinds with a title of their own (the status's title otherwise).
SLUG_TITLES = {
    "idempotency-key-reused": "Idempotency-Key reused",
    "idempotency-key-in-use": "Idempotency-Key in use",
    "not-ready": "Not ready",
}


def status_title(status: int) -> str:
    """The title of ``status`` ("Error" for a status the API does not answer)."""
    kind = STATUSES.get(status)
    return kind.title if kind else "Error"


class InvalidField(BaseModel):
    """One invalid field: where it is and what is wrong with it."""

    name: str = Field(description="dotted path of the field, e.g. quietHours.start")
    location: str = Field(
        alias="in", description="body, path, query or header", serialization_alias="in"
    )
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = Field(description="a URI reference naming the kind of problem")
    title: str
    status: int
    detail: str
    instance: str | None = Field(default=None, description="the request's path")
    errors: list[InvalidField] | None = Field(
        default=None, description="422: every invalid field, each with a message"
    )


class ApiProblem(Exception):
    """A refusal with its status; ``errors`` lists invalid fields (name, in, message)."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        errors: Sequence[dict[str, str]] = (),
        slug: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = list(errors)
        self.slug = slug
        self.headers = headers or {}


def field_error(name: str, message: str, where: str = "body") -> dict[str, str]:
    """One invalid field as a problem's ``errors`` entry: its name, where it was, what is wrong."""
    return {"name": name, "in": where, "message": message}


def invalid(errors: Iterable[dict[str, str]], detail: str | None = None) -> ApiProblem:
    """A 422 naming every invalid field."""
    errs = list(errors)
    if detail is None:
        detail = errs[0]["message"] if len(errs) == 1 else f"{len(errs)} fields are invalid"
    return ApiProblem(422, detail, errors=errs)


def problem_response(
    request_path: str | None,
    status: int,
    detail: str,
    *,
    errors: Sequence[dict[str, str]] = (),
    slug: str | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    """A problem answer; ``extra``: members of this kind of problem (RFC 9457 extensions)."""
    body = problem_body(status, detail, errors=errors, slug=slug)
    if request_path is not None:
        body["instance"] = request_path
    body.update(extra or {})
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def problem_body(
    status: int, detail: str, *, errors: Sequence[dict[str, str]] = (), slug: str | None = None
) -> dict[str, Any]:
    """The members every problem has (``errors`` only when there are some)."""
    known = STATUSES.get(status)
    kind = slug or (known.slug if known else "error")
    body: dict[str, Any] = {
        "type": TYPE_BASE + kind,
        "title": SLUG_TITLES.get(kind) or status_title(status),
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = list(errors)
    return body


def pydantic_field_error(error: Any, name: str, where: str = "body") -> dict[str, str]:
    """One of pydantic's errors as an invalid field, in the API's words."""
    if error.get("type") == "missing":
        msg = "is required"
    elif error.get("type") == "extra_forbidden":
        msg = "is not a field of this resource"
    else:
        msg = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return field_error(name, msg, where)


def dotted(parts: Iterable[Any]) -> str:
    """A location as a dotted name; a dict key's own marker (``[key]``) left out."""
    return ".".join(str(p) for p in parts if p != "[key]")
