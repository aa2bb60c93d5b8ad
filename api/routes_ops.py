"""Operators: ``GET /v1/stats`` and ``POST /v1/replays`` (ops scope: taken here, sent by the
consumers), ``GET /metrics`` (ops
scope), and the unauthenticated probes ``GET /healthz`` (the process answers) and
``GET /readyz`` (the database and the broker answer too)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from api import checks
from api.deps import BackendDep, OpsCaller
from api.models import Health, ReplayedMessage, ReplayIn, ReplayOut
from api.probes import DatabaseProbe
from api.problems import MEDIA_TYPE, field_error, invalid, problem_response, problem_responses
from shared.domain.messages import Status
from shared.errors import InputError

router = APIRouter(tags=["operators"])
REPLAY_LIST = 1000


@router.get(
    "/v1/stats",
    summary="Counts, reasons, lateness, tokens, pending by hour (as `tzpush stats --json`)",
    responses={
        200: {"content": {"application/json": {"schema": {"type": "object"}}}},
        **problem_responses(401, 403, 422, 503),
    },
)
def stats(
    b: BackendDep,
    _: OpsCaller,
    since: Annotated[
        str | None, Query(max_length=64, description="only messages due at or after (ISO 8601)")
    ] = None,
) -> dict[str, Any]:
    from ops import stats as ops_stats

    start = None
    if since is not None:
        try:
            start = checks.instant(since, "since", in_query=True)
        except InputError as exc:
            raise invalid([field_error("since", str(exc), "query")]) from None
    result: dict[str, Any] = ops_stats.compute(b.db, start, categories=b.settings.categories)
    return result


@router.post(
    "/v1/replays",
    response_model=ReplayOut,
    summary="Send missed (or project-failed) messages again, each at most once",
    status_code=202,
    responses={
        200: {"model": ReplayOut, "description": "a dry run: what would be replayed now"},
        202: {"description": "taken and queued to the consumers, which send them"},
        **problem_responses(400, 401, 403, 413, 415, 422, 503),
    },
)
def replay(body: ReplayIn, b: BackendDep, caller: OpsCaller, response: Response) -> ReplayOut:
    """The same selection and rules as `tzpush replay`; `dryRun` lists and changes nothing
    (200). A real replay takes the messages before the answer (`replaying`, recorded with the
    key's name as who replayed) and queues them to the consumers (202, `counts.queued`): a
    consumer judges each at its own instant and sends it through Expo; each message's outcome
    is then on `GET /v1/messages/{id}`. This process never sends."""
    from ops.replay import Selection, queue, resume, select

    try:
        sel = Selection(
            since=checks.instant(body.since, "since") if body.since else None,
            until=checks.instant(body.until, "until") if body.until else None,
            categories=body.categories,
            users=body.users,
            ids=body.ids,
            status=Status(body.status),
            causes=body.causes,
        )
    except InputError as exc:
        raise invalid([field_error("causes", str(exc))]) from None
    by = f"api:{caller.name}"
    if not body.dry_run:
        resume(b.db, by)
    docs = select(b.db, sel)
    listed = [
        ReplayedMessage(
            id=str(d["_id"]),
            user_id=d.get("userId") if isinstance(d.get("userId"), str) else None,
            category=d.get("category") if isinstance(d.get("category"), str) else None,
            scheduled_at=d.get("scheduledAt"),
            reason=d.get("reason") if isinstance(d.get("reason"), str) else None,
        )
        for d in docs[:REPLAY_LIST]
    ]
    counts: dict[str, int] = {}
    if body.dry_run:
        response.status_code = 200
    elif docs:
        publisher = b.manager.planner.wakeups
        counts = dict(
            queue(b.db, b.settings, publisher, docs, by=by, reason=body.reason, selection=sel)
        )
    return ReplayOut(dry_run=body.dry_run, selected=len(docs), messages=listed, counts=counts)


# The probes are ``async``: they never wait for a thread of the work pool (``api.probes``).
@router.get("/healthz", response_model=Health, summary="Liveness: the process answers")
async def healthz() -> Health:
    return Health(ok=True)


@router.get(
    "/readyz",
    response_model=Health,
    summary="Readiness: the database and the broker answer",
    responses={
        503: {
            **problem_responses(503)[503],
            "description": "not ready: a problem, with `problems` naming what does not answer",
        }
    },
)
async def readyz(b: BackendDep, request: Request) -> Any:
    problems: dict[str, str] = {}
    probe: DatabaseProbe = request.app.state.db_probe
    database = await probe.problem()
    if database is not None:
        problems["database"] = database
    broker = b.manager.planner.broker
    if broker is None or not broker.connected:
        problems["broker"] = "not connected"
    if problems:
        detail = "; ".join(f"{what} {why}" for what, why in problems.items())
        extra = {"ok": False, "problems": problems}
        return problem_response("/readyz", 503, detail, slug="not-ready", extra=extra)
    return Health(ok=True)


@router.get(
    "/metrics",
    summary="Prometheus metrics of this process",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **problem_responses(401, 403),
    },
)
def metrics_page(_: OpsCaller) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


__all__ = ["MEDIA_TYPE", "router"]
