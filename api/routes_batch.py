"""``POST /v1/batch``: up to 1,000 user, device and reminder upserts in one call (onboarding).

Each item is checked as its single resource checks it (``PUT /v1/users/{id}``,
``PUT .../devices/{id}``, ``PUT .../reminders/{id}``), then the batch is applied by
``creator.writers.batch.apply``: as if item after item, in order (a user can be created and given
devices and reminders in one batch), with the database's work done in a few bulk writes. Each
item is answered with its own result: the status its single call would have given, the id, and
for a refusal the problem (with its invalid fields). One bad item does not stop the others; the
answer is 200 as long as the batch itself is well formed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import Field, TypeAdapter, ValidationError

from api.checks import payload_problem
from api.deps import AppCaller, Backend, BackendDep
from api.models import ApiModel, DeviceIn, Id, OutModel, ReminderIn, UserIn
from api.problems import (
    ApiProblem,
    Problem,
    dotted,
    error_status,
    field_error,
    invalid,
    problem_body,
    problem_responses,
    pydantic_field_error,
)
from api.routes_reminders import spec_of
from creator.writers import batch as bulk
from shared.errors import TransientError

router = APIRouter(tags=["batch"])
MAX_ITEMS = 1000


class BatchUser(ApiModel):
    op: Literal["user"]
    user_id: Id
    user: UserIn


class BatchDevice(ApiModel):
    op: Literal["device"]
    user_id: Id
    device_id: Id
    device: DeviceIn


class BatchReminder(ApiModel):
    op: Literal["reminder"]
    user_id: Id
    reminder_id: Id
    reminder: ReminderIn


Item = Annotated[BatchUser | BatchDevice | BatchReminder, Field(discriminator="op")]
_ITEM: TypeAdapter[Any] = TypeAdapter(Item)


class BatchIn(ApiModel):
    items: list[Any] = Field(
        min_length=1,
        max_length=MAX_ITEMS,
        description="each a BatchUser, BatchDevice or BatchReminder (by `op`), applied in order",
        json_schema_extra={
            "items": {
                "oneOf": [
                    {"$ref": "#/components/schemas/BatchUser"},
                    {"$ref": "#/components/schemas/BatchDevice"},
                    {"$ref": "#/components/schemas/BatchReminder"},
                ]
            }
        },
    )


class BatchResult(OutModel):
    index: int
    status: int = Field(description="what the single call would have answered")
    id: str | None = Field(description="the user, device or reminder id")
    problem: Problem | None = None


class BatchOut(OutModel):
    results: list[BatchResult]
    succeeded: int
    failed: int


SCHEMAS = (BatchUser, BatchDevice, BatchReminder)


def _problem(status: int, detail: str, errors: list[dict[str, str]] | None = None) -> Problem:
    return Problem.model_validate(problem_body(status, detail, errors=errors or ()))


def _item(b: Backend, item: BatchUser | BatchDevice | BatchReminder) -> bulk.Item:
    """The item as the management code takes it, after the API's own check of the payload
    (under Expo's limit, naming the field): an ``ApiProblem`` if not."""
    if isinstance(item, BatchUser):
        u = item.user
        return bulk.UserChange(
            item.user_id,
            timezone=u.timezone,
            enabled=u.enabled,
            categories={c: u.categories.get(c, True) for c in b.settings.categories},
            quiet_hours=(u.quiet_hours.start, u.quiet_hours.end) if u.quiet_hours else None,
            daily_cap=u.daily_cap,
        )
    if isinstance(item, BatchDevice):
        return bulk.Login(item.user_id, item.device_id, item.device.token)
    r = item.reminder
    too_big = payload_problem(r.title, r.body, r.data)
    if too_big is not None:
        name = "data" if r.data else "body" if r.body else "title"
        raise invalid([field_error(f"reminder.{name}", too_big)])
    return bulk.ReminderPut(item.user_id, item.reminder_id, spec_of(r))


def _answer(index: int, item: bulk.Item, outcome: bulk.Outcome, shown: str | None) -> BatchResult:
    if isinstance(outcome, bulk.Done):
        if isinstance(item, bulk.UserChange):
            return BatchResult(index=index, status=200, id=item.user_id)
        if isinstance(item, bulk.Login):
            return BatchResult(index=index, status=200, id=item.device)
        status = 201 if outcome.change == "created" else 200
        return BatchResult(index=index, status=status, id=item.reminder_id)
    if isinstance(outcome, TransientError):
        raise outcome  # the database or broker is away: the whole batch is a 503
    status = error_status(outcome) or 422
    return BatchResult(index=index, status=status, id=shown, problem=_problem(status, str(outcome)))


def _name(error: Any) -> str:
    """The field's dotted path inside the item (pydantic puts the ``op`` tag first)."""
    if str(error["type"]).startswith("union_tag"):
        return "op"
    loc = list(error["loc"])
    if len(loc) > 1 and loc[0] in ("user", "device", "reminder"):
        loc = loc[1:]
    return dotted(loc) or "item"


def _shown(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return None
    raw_id = raw.get("reminderId") or raw.get("deviceId") or raw.get("userId")
    return raw_id if isinstance(raw_id, str) and len(raw_id) <= 128 else None


def _checked(b: Backend, index: int, raw: Any) -> BatchResult | bulk.Item:
    """The item ready for the management code, or its refusal."""
    if not isinstance(raw, dict):
        detail = "an item must be an object with an op: user, device or reminder"
        return BatchResult(index=index, status=422, id=None, problem=_problem(422, detail))
    try:
        item = _ITEM.validate_python(raw)
    except ValidationError as exc:
        errors = [
            pydantic_field_error(e, _name(e))
            for e in exc.errors(include_input=False, include_url=False)
        ]
        detail = errors[0]["message"] if len(errors) == 1 else f"{len(errors)} fields are invalid"
        problem = _problem(422, detail, errors)
        return BatchResult(index=index, status=422, id=_shown(raw), problem=problem)
    try:
        return _item(b, item)
    except ApiProblem as exc:
        problem = _problem(exc.status, exc.detail, exc.errors)
        return BatchResult(index=index, status=exc.status, id=_shown(raw), problem=problem)


@router.post(
    "/v1/batch",
    response_model=BatchOut,
    summary="Up to 1,000 user, device and reminder upserts, each answered on its own",
    responses=problem_responses(400, 401, 413, 415, 422, 503),
)
def batch(body: BatchIn, b: BackendDep, _: AppCaller) -> BatchOut:
    """A database or broker outage stops the batch with a 503: the items before it are
    applied, and sending the whole batch again is safe (every item is an upsert)."""
    checked = [_checked(b, i, raw) for i, raw in enumerate(body.items)]
    todo = [(i, c) for i, c in enumerate(checked) if not isinstance(c, BatchResult)]
    outcomes = bulk.apply(b.manager, [c for _, c in todo])
    results = [c for c in checked if isinstance(c, BatchResult)]
    for (i, item), outcome in zip(todo, outcomes, strict=True):
        results.append(_answer(i, item, outcome, _shown(body.items[i])))
    results.sort(key=lambda r: r.index)
    ok = sum(1 for r in results if r.status < 400)
    return BatchOut(results=results, succeeded=ok, failed=len(results) - ok)
