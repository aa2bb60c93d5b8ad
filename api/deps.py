"""What every route needs: the backend (management code, database, settings) and the caller.

``Backend`` is built once per process by ``api.app.create_app`` and kept on ``app.state``; the
dependencies below hand it to routes, and check the bearer key and its scope before a route
runs. FastAPI runs the (synchronous) routes in its thread pool: the Manager keeps no state of
its own between calls, pymongo's client is thread-safe, and the STOMP client sends under a lock.
A login is awaited on the event loop instead (``Backend.login``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pymongo.database import Database

from api import key_gate
from api.coalesce import Coalescer
from api.idempotency import IdempotencyStore
from api.keys import KeyRing, Principal
from api.limits import RateLimiter
from api.manage import ApiManager
from api.problems import ApiProblem
from creator.writers import batch as bulk
from shared.domain.messages import Doc
from shared.errors import TzpushError
from shared.settings import Settings


@dataclass
class Backend:
    settings: Settings
    manager: ApiManager
    keys: KeyRing
    idempotency: IdempotencyStore
    limiter: RateLimiter = field(default_factory=RateLimiter)
    # Concurrent logins written together (api.coalesce); None: each on its own.
    logins: Coalescer[bulk.Login, bulk.Outcome] | None = None

    @property
    def db(self) -> Database[Doc]:
        return self.manager.db

    async def login(self, user_id: str, device_id: str, token: str) -> Doc:
        """A login (``creator.writers.batch.register_tokens``), with whatever logins arrive with it.

        Awaited on the event loop, not on a worker thread: the request waits for the
        coalescer's answer without holding a thread, nor handing over to one and back."""
        login = bulk.Login(user_id, device_id, token)
        if self.logins is not None:
            outcome = await asyncio.wrap_future(self.logins.submit(login))
        else:
            outcome = await run_in_threadpool(
                lambda: bulk.register_tokens(self.manager, [login])[0]
            )
        if isinstance(outcome, TzpushError):
            raise outcome
        return outcome.doc


# The dependencies below are ``async``: they never block (a hash, a comparison, a token
# bucket), and FastAPI runs a plain ``def`` dependency on a worker thread, a hand-over and back
# per dependency per request, each of them a wait for the interpreter's lock while the
# coalescer's thread is busy.
async def backend(request: Request) -> Backend:
    b: Backend = request.app.state.backend
    return b


BackendDep = Annotated[Backend, Depends(backend)]

_bearer = HTTPBearer(auto_error=False, description="an API key: Authorization: Bearer <key>")


async def _caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    keys: KeyRing = request.app.state.backend.keys
    principal = keys.identify(credentials.credentials if credentials else None)
    if principal is None:
        raise ApiProblem(401, key_gate.NO_KEY, headers=key_gate.CHALLENGE)
    request.state.principal = principal  # its name, for the access log; never the key
    limiter: RateLimiter = request.app.state.backend.limiter
    wait = limiter.take(principal.name)
    if wait:
        raise ApiProblem(
            429,
            f"the key {principal.name!r} is over {limiter.rate:g} requests a second; "
            "try again after Retry-After seconds",
            headers={"Retry-After": limiter.retry_after(wait)},
        )
    return principal


async def app_caller(principal: Annotated[Principal, Depends(_caller)]) -> Principal:
    return principal


async def ops_caller(principal: Annotated[Principal, Depends(_caller)]) -> Principal:
    if not principal.may("ops"):
        raise ApiProblem(
            403, f"the key {principal.name!r} has scope {principal.scope!r}; this needs ops"
        )
    return principal


AppCaller = Annotated[Principal, Depends(app_caller)]
OpsCaller = Annotated[Principal, Depends(ops_caller)]
