"""The FastAPI application: routes, problem details for every error, the body limit, metrics.

``create_app(backend)`` is pure wiring (tests build it around any backend); ``open_backend``
connects one from settings (the database with its indexes, the broker for re-planning), as
``creator.service.open_manager`` does for the CLI.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from prometheus_client import Counter, Histogram
from pymongo.errors import ConnectionFailure
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from api import checks, problems
from api.coalesce import Coalescer
from api.deps import Backend
from api.idempotency import IdempotencyStore
from api.key_gate import KeyGate
from api.keys import KeyRing
from api.limits import RateLimiter
from api.manage import ApiManager
from api.models import ApiModel
from api.probes import DatabaseProbe
from api.problems import InvalidField, Problem
from creator.writers import batch as bulk
from shared.errors import TzpushError
from shared.settings import Settings
from shared.store import db as dbm
from shared.store.mongo.web import web_stores

VERSION = "1"
DESCRIPTION = """Recurring push reminders at each user's own local time.

Authenticate with `Authorization: Bearer <key>`. Keys have a scope: `app` (users, devices,
reminders, messages) or `ops` (also stats, replays, /metrics). Every error is
`application/problem+json` (RFC 9457); refused input lists each invalid field. Lists are pages:
`limit` (at most 200) and the `next` link. See docs/api.md.
"""

REQUESTS = Counter(
    "tzpush_api_requests_total", "HTTP API requests answered", ["method", "route", "status"]
)
LATENCY = Histogram(
    "tzpush_api_request_seconds",
    "HTTP API request duration",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


class RequestMetrics(problems.HttpMiddleware):
    """Counts each answer by method, route template (never the ids in it) and status."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = time.perf_counter()
        watch = problems.ResponseWatch(send)
        try:
            await self.app(scope, receive, watch.send)
        finally:
            route = getattr(scope.get("route"), "path", None) or "(unmatched)"
            method = str(scope.get("method", ""))
            REQUESTS.labels(method, route, str(watch.status or 500)).inc()
            LATENCY.labels(method, route).observe(time.perf_counter() - t0)


class RequestRules(problems.HttpMiddleware):
    """What holds for every request to the API's resources (``/v1/``), before any route:
    the configured categories are the ones the models check (``api.checks.check_category``);
    a body said to be something other than JSON is a 415; a query parameter given twice is a
    422 (which one would count is a guess, so neither does)."""

    def __init__(self, app: Any, categories: tuple[str, ...]) -> None:
        super().__init__(app)
        self.categories = categories

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        routed = str(scope.get("path", ""))  # decoded, as the router matches it
        refusal = problems.request_shape_problem(scope) if routed.startswith("/v1/") else None
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        token = checks.CONFIGURED_CATEGORIES.set(self.categories)
        try:
            await self.app(scope, receive, send)
        finally:
            checks.CONFIGURED_CATEGORIES.reset(token)


def _work_pool(threads: int) -> Any:
    """A lifespan that bounds the threads running the routes' work (anyio's default is 40):
    on 2 cores, 40 threads busy with Python code each take the interpreter's lock in turn, and
    the event loop, which answers the health probes, waits behind them (p99 322 ms measured
    with 45 zone changes at once; see docs/api.md)."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> Any:
        import anyio.to_thread

        anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        yield

    return lifespan


def create_app(backend: Backend) -> FastAPI:
    app = FastAPI(
        lifespan=_work_pool(backend.settings.api.work_threads),
        redirect_slashes=False,  # a redirect would name http:// behind a TLS load balancer
        title="tzpush",
        version=VERSION,
        description=DESCRIPTION,
        docs_url=None,  # api.docs_ui serves /docs from this origin only
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.backend = backend
    app.state.db_probe = DatabaseProbe(lambda: backend.db.client)
    from api import (
        docs_ui,
        routes_batch,
        routes_messages,
        routes_ops,
        routes_reminders,
        routes_users,
    )

    docs_ui.install(app, title="tzpush", openapi_url="/openapi.json")

    for module in (routes_users, routes_reminders, routes_messages, routes_batch, routes_ops):
        app.include_router(module.router)
    from api import console

    console.install(app, backend)  # the operator's console under /console (api/console)
    app.add_exception_handler(problems.ApiProblem, problems.on_api_problem)
    app.add_exception_handler(RequestValidationError, problems.on_validation)
    app.add_exception_handler(StarletteHTTPException, problems.on_http_exception)
    app.add_exception_handler(TzpushError, problems.on_project_error)
    app.add_exception_handler(ConnectionFailure, problems.on_project_error)
    # Added last = outermost: metrics see every answer, CatchAll catches whatever is left.
    app.add_middleware(RequestRules, categories=tuple(backend.settings.categories))
    app.add_middleware(problems.BodyLimit, limit=backend.settings.api.max_body_bytes)
    app.add_middleware(KeyGate, keys=backend.keys)  # before any rule that reads the body
    app.add_middleware(RequestMetrics)
    app.add_middleware(problems.CatchAll)
    _document_problems(app)
    return app


def _document_problems(app: FastAPI) -> None:
    """Put the Problem schema in the OpenAPI document the routes' error answers refer to."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        from api.routes_batch import SCHEMAS

        for model in (Problem, InvalidField, *SCHEMAS):
            js = model.model_json_schema(ref_template="#/components/schemas/{model}", by_alias=True)
            components.update(js.pop("$defs", {}))
            components[model.__name__] = js
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


@contextlib.contextmanager
def open_backend(settings: Settings) -> Iterator[Backend]:
    """A connected backend (indexes ensured, the broker connected); closes on exit."""
    from creator.service import open_planner

    with open_planner(settings) as planner:
        ensure_api_indexes(planner.db)
        manager = ApiManager(planner.db, planner, settings)
        logins: Coalescer[bulk.Login, bulk.Outcome] = Coalescer(
            lambda batch: bulk.register_tokens(manager, batch),
            max_waiting=settings.api.login_queue,
            name="api-logins",
        )
        try:
            yield Backend(
                settings=settings,
                manager=manager,
                keys=KeyRing(settings.api.keys),
                idempotency=IdempotencyStore(web_stores(planner.db).idempotency, planner.clock),
                limiter=RateLimiter(settings.api.rate_per_second, settings.api.burst),
                logins=logins,
            )
        finally:
            logins.close()


def ensure_api_indexes(database: Any) -> None:
    """The API's own indexes: idempotency records expire after 24 h, console sessions when
    they end. (A user's messages by due instant is in every database: ``shared.store.db``.)"""
    with dbm.translate_errors("creating the API's indexes"):
        web_stores(database).ensure_expiry()


__all__ = ["ApiModel", "create_app", "ensure_api_indexes", "open_backend"]
