"""The API's ASGI middleware: HTTP-only base, the catch-all 500, the request-shape and body-size
refusals. Each answers with a problem (``api.problems.model``)."""

from __future__ import annotations

import logging
from collections import Counter
from urllib.parse import parse_qsl

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.problems.model import field_error, invalid, problem_response

log = logging.getLogger(__name__)


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
    """The request's raw (still percent-encoded) path, as ASCII; "" if the server gave none."""
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
