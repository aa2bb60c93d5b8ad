"""``GET /v1/users/{userId}/messages`` (history and upcoming, a page at a time, by due instant)
and ``GET /v1/messages/{messageId}``."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request

from api import checks, pages
from api.deps import AppCaller, BackendDep
from api.models import MessageOut, MessagePage
from api.params import MessageId, PageDep, UserId
from api.problems import READS, ApiProblem, field_error, invalid, problem_responses
from api.views import device_ids, message_out
from shared.domain.messages import Doc, Status
from shared.domain.validation import shown
from shared.errors import InputError
from shared.store import db as dbm

router = APIRouter(tags=["messages"])

StatusParam = Annotated[
    Literal["pending", "replaying", "success", "failed", "is_missed", "cancelled"] | None,
    Query(description="only messages in this status"),
]
InstantParam = Annotated[str | None, Query(max_length=64, description="ISO 8601 instant")]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _instant(raw: str | None, name: str) -> dt.datetime | None:
    if raw is None:
        return None
    try:
        return checks.instant(raw, name)
    except InputError as exc:
        raise invalid([field_error(name, str(exc), "query")]) from None


@router.get(
    "/v1/users/{userId}/messages",
    response_model=MessagePage,
    summary="A user's messages, sent and upcoming, by due instant",
    responses=problem_responses(401, 422, 503),
)
def list_messages(
    user_id: UserId,
    b: BackendDep,
    _: AppCaller,
    request: Request,
    page: PageDep,
    status: StatusParam = None,
    since: InstantParam = None,
    until: InstantParam = None,
) -> MessagePage:
    """Messages due in `[since, until)`, oldest first; each with its status, the reason (for
    every end but success), when it was sent and how late. A user with none (or unknown, or
    erased) has an empty list."""
    start, end = _instant(since, "since"), _instant(until, "until")
    limit = page.limit
    key = pages.decode(page.after, (int, str))
    flt: Doc = {"userId": user_id, "scheduledAt": {"$gte": start or EPOCH}}
    if end is not None:
        flt["scheduledAt"]["$lt"] = end
    if status is not None:
        flt["status"] = Status(status).value
    if key is not None:
        at = EPOCH + dt.timedelta(milliseconds=key[0])
        flt = {
            "$and": [
                flt,
                {
                    "$or": [
                        {"scheduledAt": {"$gt": at}},
                        {"scheduledAt": at, "_id": {"$gt": key[1]}},
                    ]
                },
            ]
        }
    docs = list(
        b.db[dbm.MESSAGES].find(flt).sort([("scheduledAt", 1), ("_id", 1)]).limit(limit + 1)
    )
    more = len(docs) > limit
    docs = docs[:limit]
    devices = device_ids(b.db, docs)
    cursor = None
    if more:
        last = docs[-1]
        ms = int((last["scheduledAt"] - EPOCH).total_seconds() * 1000)
        cursor = pages.encode([ms, last["_id"]])
    params = {"status": status, "since": since, "until": until, "limit": limit}
    return MessagePage(
        items=[message_out(d, devices) for d in docs],
        next=pages.next_link(request.url.path, params, cursor),
    )


@router.get(
    "/v1/messages/{messageId}",
    response_model=MessageOut,
    summary="One message",
    responses=READS,
)
def get_message(message_id: MessageId, b: BackendDep, _: AppCaller) -> MessageOut:
    doc = b.db[dbm.MESSAGES].find_one({"_id": message_id})
    if doc is None:
        raise ApiProblem(404, f"no message {shown(message_id)}")
    return message_out(doc, device_ids(b.db, [doc]))
