"""The API's resources refuse a request without a valid key before anything reads its body.

FastAPI reads and parses a body before it solves a route's dependencies, so the key check in
``api.deps`` alone would let anyone without a key make the API read and parse up to
``TZPUSH_API__MAX_BODY_BYTES`` on its event loop. ``KeyGate`` answers such a request 401 from
its headers alone; the route's own dependency then checks the scope and the rate as before.
"""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from api import problems
from api.keys import KeyRing

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="tzpush"'}
NO_KEY = "a valid API key is required: Authorization: Bearer <key>"


def presented_key(scope: Scope) -> str | None:
    """The bearer key in the request's first Authorization header, or None."""
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            return key.strip() or None if scheme.lower() == "bearer" else None
    return None


class KeyGate(problems.HttpMiddleware):
    """ASGI middleware: a request to a keyed path whose key is missing or unknown is answered
    401 (problem+json, ``WWW-Authenticate``) without reading its body."""

    def __init__(self, app: object, keys: KeyRing) -> None:
        super().__init__(app)  # type: ignore[arg-type]
        self.keys = keys

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        routed = str(scope.get("path", ""))  # decoded, as the router matches it
        keyed = routed.startswith("/v1/") or routed == "/metrics"
        if keyed and self.keys.identify(presented_key(scope)) is None:
            refusal = problems.problem_response(
                problems.raw_path(scope), 401, NO_KEY, headers=CHALLENGE
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)
