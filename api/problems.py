"""Errors as RFC 9457 problem details (``application/problem+json``), for every answer >= 400.

One shape everywhere: ``type``, ``title``, ``status``, ``detail``, ``instance`` and, for
refused input, ``errors``: one entry per invalid field with its ``name`` (a dotted path such as
``quietHours.start`` or ``items.3.reminder.at``), where it was (``body``, ``path``, ``query``,
``header``) and a ``message`` that names the value (``unknown time zone 'Europe/Berln'``).

What raises what:
- ``ApiProblem`` (and ``invalid(...)``): the API's own refusals, with their status.
- The project's error tree, raised by the management code: ``InputError`` 422, ``NotFoundError``
  404, ``TransientError`` (and the driver's connection failures) 503 with ``Retry-After``.
- FastAPI's request validation 422 (400 for a body that is not JSON), Starlette's 404/405.
- Anything else is a bug: ``CatchAll`` logs it with its traceback (method and route only, never
  a header, so never a key) and answers a 500 problem. The fuzz test asserts none happen.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import parse_qsl

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from pymongo.errors import ConnectionFailure
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.errors import (
    ConflictError,
    InputError,
    NotFoundError,
    Overloaded,
    PermanentError,
    TransientError,
)

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "/problems/"  # a relative URI; docs/api.md says what each type means

TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Content too large",
    415: "Unsupported media type",
    422: "Invalid input",
    429: "Too many requests",
    500: "Internal error",
    503: "Service unavailable",
}
SLUGS = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    413: "too-large",
    415: "unsupported-media-type",
    422: "invalid-input",
    429: "too-many-requests",
    500: "internal",
    503: "unavailable",
}
# Kinds with a title of their own (the status's title otherwise).
SLUG_TITLES = {
    "idempotency-key-reused": "Idempotency-Key reused",
    "idempotency-key-in-use": "Idempotency-Key in use",
    "not-ready": "Not ready",
}


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
    kind = slug or SLUGS.get(status, "error")
    body: dict[str, Any] = {
        "type": TYPE_BASE + kind,
        "title": SLUG_TITLES.get(kind) or TITLES.get(status, "Error"),
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


def _path(request: Request) -> str:
    # The raw (still percent-encoded) path: always ASCII, whatever the client sent.
    raw = request.scope.get("raw_path") or request.url.path.encode()
    return raw.decode("ascii", "replace").split("?", 1)[0]


def _loc_name(loc: Sequence[Any]) -> tuple[str, str]:
    where = str(loc[0]) if loc else "body"
    rest = list(loc[1:])
    if where not in ("body", "path", "query", "header", "cookie"):
        where, rest = "body", list(loc)
    return where, dotted(rest) or where


async def on_api_problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiProblem)
    return problem_response(
        _path(request),
        exc.status,
        exc.detail,
        errors=exc.errors,
        slug=exc.slug,
        headers=exc.headers,
    )


async def on_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errs = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errs):
        return problem_response(_path(request), 400, "the body is not valid JSON")
    out = []
    for e in errs:
        where, name = _loc_name(e.get("loc", ()))
        out.append(pydantic_field_error(e, name, where))
    problem = invalid(out)
    return problem_response(_path(request), 422, problem.detail, errors=out)


async def on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else TITLES.get(exc.status_code, "error")
    if exc.status_code == 404 and detail == "Not Found":
        path = _path(request)
        detail = "no such resource"
        if len(path) > 1 and path.endswith("/"):  # no redirect: it would be http:// behind TLS
            detail = f"no such resource; without the trailing slash: {path.rstrip('/')}"
    return problem_response(
        _path(request), exc.status_code, detail, headers=dict(exc.headers or {})
    )


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is answered 4xx: the request was refused, nothing of it was done (the
    same mapping as the handlers here: ``ApiProblem`` by its status, the project's errors as
    ``on_project_error`` answers them)."""
    if isinstance(exc, ApiProblem):
        return exc.status < 500
    if isinstance(exc, StarletteHTTPException):
        return exc.status_code < 500
    return isinstance(exc, NotFoundError | ConflictError | InputError | PermanentError)


async def on_project_error(request: Request, exc: Exception) -> Response:
    """The project's error tree, as the management code raises it."""
    if isinstance(exc, NotFoundError):
        return problem_response(_path(request), 404, str(exc))
    if isinstance(exc, ConflictError):
        return problem_response(_path(request), 409, str(exc))
    if isinstance(exc, InputError | PermanentError):
        return problem_response(_path(request), 422, str(exc))
    if isinstance(exc, Overloaded):  # our own refusal, said as it is; not logged each time
        return problem_response(_path(request), 503, str(exc), headers={"Retry-After": "1"})
    if isinstance(exc, TransientError | ConnectionFailure):
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return problem_response(
            _path(request),
            503,
            "the database or the broker is unavailable; try again shortly",
            headers={"Retry-After": "1"},
        )
    raise exc  # not ours to answer: CatchAll logs it and answers 500


class HttpMiddleware:
    """An ASGI middleware for HTTP requests only (anything else passes straight through); a
    subclass writes ``handle``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class ResponseWatch:
    """An ASGI ``send`` that remembers whether the answer has started, and its status."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.status: int | None = None

    @property
    def started(self) -> bool:
        return self.status is not None

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        await self._send(message)


def raw_path(scope: Scope) -> str:
    raw = scope.get("raw_path") or b""
    return str(raw.decode("ascii", "replace"))


class CatchAll(HttpMiddleware):
    """Outermost ASGI middleware: an exception nobody handled is logged and answered 500."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = ResponseWatch(send)
        try:
            await self.app(scope, receive, watch.send)
        except Exception:
            route = scope.get("route")
            where = getattr(route, "path", None) or "(no route)"
            log.exception("unhandled error in %s %s", scope.get("method"), where)
            if watch.started:
                raise
            response = problem_response(
                raw_path(scope) or None, 500, "an internal error occurred; it has been logged"
            )
            await response(scope, receive, send)


def request_shape_problem(scope: Scope) -> Response | None:
    """The refusal of a request with a body not said to be JSON (415), or that gives a query
    parameter more than once (422); None if neither."""
    path = raw_path(scope)
    if scope.get("method") in ("POST", "PUT", "PATCH"):
        headers: dict[bytes, bytes] = {}
        for key, value in scope.get("headers") or []:
            headers.setdefault(key, value)  # the first, as the body is read by
        length = headers.get(b"content-length", b"0").decode("latin-1").strip()
        has_body = (not length.isdigit() or int(length) > 0) or b"transfer-encoding" in headers
        said = headers.get(b"content-type", b"").decode("latin-1")
        media = said.split(";", 1)[0].strip().lower()
        if has_body and media != "application/json" and not media.endswith("+json"):
            return problem_response(
                path,
                415,
                "the body must be JSON, sent with Content-Type: application/json (this one "
                + (f"said {said[:80]!r})" if said else "said none)"),
            )
    query = (scope.get("query_string") or b"").decode("latin-1")
    if query:
        counts = Counter(name for name, _ in parse_qsl(query, keep_blank_values=True))
        twice = [
            field_error(name, f"given {n} times; give it once", "query")
            for name, n in counts.items()
            if n > 1
        ]
        if twice:
            problem = invalid(twice)
            return problem_response(path, 422, problem.detail, errors=problem.errors)
    return None


class BodyTooLarge(StarletteHTTPException):
    """The request body went over ``max_body_bytes``. An HTTP exception, so FastAPI passes it
    through its body parsing (which turns other errors into a 400) to ``on_http_exception``."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large_detail(limit))


def _too_large_detail(limit: int) -> str:
    return f"the body is over {limit} bytes (TZPUSH_API__MAX_BODY_BYTES)"


class BodyLimit(HttpMiddleware):
    """ASGI middleware: 413 for a body over ``limit`` bytes, by Content-Length or as it
    streams (a chunked body is counted while it is read, never buffered past the limit)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        super().__init__(app)
        self.limit = limit

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = raw_path(scope)
        for key, value in scope.get("headers") or []:
            if key == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    await problem_response(path, 400, "bad Content-Length")(scope, receive, send)
                    return
                if length > self.limit:
                    await self._too_large(path, scope, receive, send)
                    return
        seen = 0

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        watch = ResponseWatch(send)
        try:
            await self.app(scope, counting_receive, watch.send)
        except BodyTooLarge:
            if not watch.started:
                await self._too_large(path, scope, receive, send)

    async def _too_large(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        await problem_response(path, 413, _too_large_detail(self.limit))(scope, receive, send)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries: each status answered as problem+json."""
    schema = {"$ref": "#/components/schemas/Problem"}
    if 401 in statuses:  # a keyed route: its key may be over the rate limit (api.limits)
        statuses = (*statuses, 429)
    return {
        s: {"description": TITLES.get(s, "Error"), "content": {MEDIA_TYPE: {"schema": schema}}}
        for s in sorted(set(statuses))
    }


READS = problem_responses(401, 404, 422, 503)
"""A read of one user's resource: no key, no such thing, a bad id, the database away."""
WRITES = problem_responses(400, 401, 404, 413, 415, 422, 503)
"""A write with a JSON body: READS and a body that is not JSON, not said to be, or too large."""
NO_CONTENT: dict[str, Any] = {
    "status_code": 204,
    "response_class": Response,
    "responses": READS,
}
"""A DELETE answered 204 with no body (its route adds the summary)."""
