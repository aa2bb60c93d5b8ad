"""``POST /v1/batch``: up to 1,000 user, device and reminder upserts in one call (onboarding).

Each item is checked and applied on its own, in order, through the same code as its single
resource (``PUT /v1/users/{id}``, ``PUT .../devices/{id}``, ``PUT .../reminders/{id}``), and
answered with its own result: the status that call would have given, the id, and for a refusal
the problem (with its invalid fields). One bad item does not stop the others; the answer is 200
as long as the batch itself is well formed. Items run in order, so a user can be created and
given devices and reminders in one batch.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import Field, TypeAdapter, ValidationError

from api.deps import AppCaller, Backend, BackendDep
from api.models import ApiModel, DeviceIn, Id, OutModel, ReminderIn, UserIn
from api.problems import (
    SLUGS,
    TITLES,
    TYPE_BASE,
    ApiProblem,
    Problem,
    field_error,
    problem_responses,
)
from api.routes_reminders import put as put_reminder
from shared.errors import InputError, NotFoundError

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
    items: list[dict[str, Any]] = Field(
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
    return Problem.model_validate(
        {
            "type": TYPE_BASE + SLUGS.get(status, "error"),
            "title": TITLES.get(status, "Error"),
            "status": status,
            "detail": detail,
            "errors": errors or None,
        }
    )


def _apply(b: Backend, item: BatchUser | BatchDevice | BatchReminder) -> tuple[int, str]:
    m = b.manager
    if isinstance(item, BatchUser):
        u = item.user
        b.check_categories(list(u.categories), "user.categories")
        quiet = (u.quiet_hours.start, u.quiet_hours.end) if u.quiet_hours else None
        m.upsert_user(
            item.user_id,
            timezone=u.timezone,
            enabled=u.enabled,
            categories={c: u.categories.get(c, True) for c in b.settings.categories},
            quiet_hours=quiet,
            daily_cap=u.daily_cap,
        )
        return 200, item.user_id
    if isinstance(item, BatchDevice):
        m.register_token(item.user_id, device=item.device_id, token=item.device.token)
        return 200, item.device_id
    _, created = put_reminder(b, item.user_id, item.reminder_id, item.reminder)
    return (201 if created else 200), item.reminder_id


def _name(error: Any) -> str:
    """The field's dotted path inside the item (pydantic puts the ``op`` tag first)."""
    if str(error["type"]).startswith("union_tag"):
        return "op"
    loc = [str(p) for p in error["loc"]]
    if len(loc) > 1 and loc[0] in ("user", "device", "reminder"):
        loc = loc[1:]
    return ".".join(loc) or "item"


def _msg(error: Any) -> str:
    return str(error["msg"]).removeprefix("Value error, ")


def _one(b: Backend, index: int, raw: dict[str, Any]) -> BatchResult:
    raw_id = raw.get("reminderId") or raw.get("deviceId") or raw.get("userId")
    shown = raw_id if isinstance(raw_id, str) and len(raw_id) <= 128 else None
    try:
        item = _ITEM.validate_python(raw)
    except ValidationError as exc:
        errors = [
            field_error(_name(e), "is required" if e["type"] == "missing" else _msg(e))
            for e in exc.errors(include_input=False, include_url=False)
        ]
        detail = errors[0]["message"] if len(errors) == 1 else f"{len(errors)} fields are invalid"
        return BatchResult(index=index, status=422, id=shown, problem=_problem(422, detail, errors))
    try:
        status, ident = _apply(b, item)
    except ApiProblem as exc:
        return BatchResult(
            index=index,
            status=exc.status,
            id=shown,
            problem=_problem(exc.status, exc.detail, exc.errors),
        )
    except NotFoundError as exc:
        return BatchResult(index=index, status=404, id=shown, problem=_problem(404, str(exc)))
    except InputError as exc:
        return BatchResult(index=index, status=422, id=shown, problem=_problem(422, str(exc)))
    return BatchResult(index=index, status=status, id=ident)


@router.post(
    "/v1/batch",
    response_model=BatchOut,
    summary="Up to 1,000 user, device and reminder upserts, each answered on its own",
    responses=problem_responses(400, 401, 413, 422, 503),
)
def batch(body: BatchIn, b: BackendDep, _: AppCaller) -> BatchOut:
    """A database or broker outage stops the batch with a 503: the items before it are
    applied, and sending the whole batch again is safe (every item is an upsert)."""
    results = [_one(b, i, raw) for i, raw in enumerate(body.items)]
    ok = sum(1 for r in results if r.status < 400)
    return BatchOut(results=results, succeeded=ok, failed=len(results) - ok)
