"""``/v1/users/{userId}/reminders``: PUT (client id), POST (server id, ``Idempotency-Key``),
PATCH, DELETE, GET one, GET a page. Each answer carries the read-only ``nextOccurrenceAt``
(UTC and local) and ``lastOccurrence`` (when, status, reason)."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from api import pages
from api.checks import WEEKDAYS
from api.deps import AppCaller, Backend, BackendDep
from api.idempotency import IdempotencyStore, Stored, check_key, fingerprint
from api.manage import ReminderSpec, new_reminder_id
from api.models import ReminderIn, ReminderOut, ReminderPage, ReminderPatch
from api.params import IdempotencyKey, PageDep, ReminderId, UserId
from api.problems import is_refusal, problem_responses
from api.router import ResourceRouter
from api.views import reminder_out
from shared.domain.messages import Doc
from shared.store.mongo import reads
from shared.store.mongo.history import last_occurrences

router = ResourceRouter(prefix="/v1/users/{userId}/reminders", tags=["reminders"])


def spec_of(body: ReminderIn) -> ReminderSpec:
    return ReminderSpec(
        category=body.category,
        label=body.label,
        at=body.at,
        offset_minutes=body.offset_minutes,
        weekdays=[WEEKDAYS.index(d) for d in body.weekdays] if body.weekdays else None,
        title=body.title,
        body=body.body,
        data=body.data,
        active=body.active,
    )


def show(b: Backend, doc: Doc) -> ReminderOut:
    """One reminder with its next and last occurrence."""
    now = b.manager.now
    user = reads.user(b.db, doc["userId"])
    last = last_occurrences(b.db, doc["userId"], [doc], now).get(doc["_id"])
    return reminder_out(doc, user, now, last)


def put(b: Backend, user_id: str, reminder_id: str, body: ReminderIn) -> tuple[Doc, bool]:
    return b.manager.put_reminder(user_id, reminder_id, spec_of(body))


@router.put(
    "/{reminderId}",
    response_model=ReminderOut,
    summary="Create or replace a reminder under your own id",
    responses={
        201: {"description": "Created", "model": ReminderOut},
        **problem_responses(400, 401, 404, 409, 413, 415, 422, 503),
    },
)
def put_reminder(
    user_id: UserId,
    reminder_id: ReminderId,
    body: ReminderIn,
    b: BackendDep,
    _: AppCaller,
    response: Response,
) -> ReminderOut:
    """Idempotent: the same body again changes nothing. A changed reminder gets a new version;
    the old version's pending messages are cancelled and the new ones planned at once.
    Reminder ids are global: an id another user holds is a 409."""
    doc, created = put(b, user_id, reminder_id, body)
    response.status_code = 201 if created else 200
    return show(b, doc)


@router.post(
    "",
    status_code=201,
    response_model=ReminderOut,
    summary="Create a reminder (the server picks its id)",
    responses=problem_responses(400, 401, 404, 409, 413, 415, 422, 503),
)
def post_reminder(
    user_id: UserId,
    body: ReminderIn,
    b: BackendDep,
    caller: AppCaller,
    request: Request,
    idempotency_key: IdempotencyKey = None,
) -> Any:
    """With an `Idempotency-Key` header, a retry within 24 h with the same body answers the
    first answer (`Idempotent-Replayed: true`) instead of creating a second reminder; the same
    key with another body is refused (422), and while the first is still running, 409."""
    if idempotency_key is None:
        doc, _ = put(b, user_id, new_reminder_id(), body)
        return show(b, doc)
    store: IdempotencyStore = b.idempotency
    record = store.record_id(caller.name, f"POST {user_id}/reminders", check_key(idempotency_key))
    body_hash = fingerprint(body.model_dump(mode="json", by_alias=True))
    claim = store.begin(record, body_hash, new_reminder_id(), user_id=user_id)
    if isinstance(claim, Stored):
        return JSONResponse(
            claim.body, status_code=claim.status, headers={"Idempotent-Replayed": "true"}
        )
    try:
        doc, _ = put(b, user_id, claim.resource_id, body)
        out = show(b, doc).model_dump(mode="json", by_alias=True)
    except BaseException as exc:
        if is_refusal(exc):
            store.release(record)  # refused: nothing made, the key is free again
        else:
            store.cut(record)  # maybe half done: the same request sent again finishes it
        raise
    store.finish(record, 201, out)
    return JSONResponse(out, status_code=201)


@router.write("/{reminderId}", ReminderOut, "Change some fields of a reminder", method="PATCH")
def patch_reminder(
    user_id: UserId, reminder_id: ReminderId, body: ReminderPatch, b: BackendDep, _: AppCaller
) -> ReminderOut:
    """Only the fields given change; null clears weekdays (every day), title, body, data."""
    given = body.model_fields_set
    changes: dict[str, Any] = {name: getattr(body, name) for name in given}
    if "weekdays" in changes and changes["weekdays"] is not None:
        changes["weekdays"] = [WEEKDAYS.index(d) for d in changes["weekdays"]]
    doc = b.manager.patch_reminder(user_id, reminder_id, changes)
    return show(b, doc)


@router.remove("/{reminderId}", "Remove a reminder")
def delete_reminder(
    user_id: UserId, reminder_id: ReminderId, b: BackendDep, _: AppCaller
) -> Response:
    """Its pending messages are cancelled ("reminder removed"); removing it again is fine."""
    b.manager.delete_reminder(user_id, reminder_id)
    return Response(status_code=204)


@router.read("/{reminderId}", ReminderOut, "A reminder")
def get_reminder(
    user_id: UserId, reminder_id: ReminderId, b: BackendDep, _: AppCaller
) -> ReminderOut:
    return show(b, b.manager.owned_reminder(user_id, reminder_id))


@router.read("", ReminderPage, "The user's reminders, a page at a time (by id)")
def list_reminders(
    user_id: UserId,
    b: BackendDep,
    _: AppCaller,
    request: Request,
    page: PageDep,
) -> ReminderPage:
    limit = page.limit
    key = pages.decode(page.after, "reminders", (str,))
    user = b.manager.get_user(user_id)
    docs = reads.live_reminders(b.db, user_id, None if key is None else key[0], limit + 1)
    more = len(docs) > limit
    docs = docs[:limit]
    now = b.manager.now
    last = last_occurrences(b.db, user_id, docs, now)
    items = [reminder_out(d, user, now, last.get(d["_id"])) for d in docs]
    cursor = pages.encode("reminders", [docs[-1]["_id"]]) if more else None
    link = pages.next_link(request, {"limit": limit}, cursor)
    return ReminderPage(items=items, next=link)
