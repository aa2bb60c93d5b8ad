"""``GET /v1/users/{userId}/messages`` (history and upcoming, a page at a time, by due instant)
and ``GET /v1/messages/{messageId}``."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from fastapi import Query, Request

from api import checks, pages
from api.deps import AppCaller, BackendDep
from api.models import MessageOut, MessagePage
from api.params import MessageId, PageDep, UserId
from api.problems import ApiProblem, field_error, invalid, problem_responses
from api.router import ResourceRouter
from api.views import device_ids, message_out
from shared.domain.messages import Status
from shared.domain.validation import shown
from shared.errors import InputError
from shared.instants import EPOCH
from shared.store.mongo import reads
from shared.store.mongo.history import messages_page

router = ResourceRouter(tags=["messages"])

StatusParam = Annotated[
    Literal["pending", "replaying", "success", "failed", "is_missed", "cancelled"] | None,
    Query(description="only messages in this status"),
]
InstantParam = Annotated[str | None, Query(max_length=64, description="ISO 8601 instant")]


def _instant(raw: str | None, name: str) -> dt.datetime | None:
    if raw is None:
        return None
    try:
        return checks.instant(raw, name, in_query=True)
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
    key = pages.decode(page.after, "messages", (int, str))
    after = None
    if key is not None:
        try:
            after = (EPOCH + dt.timedelta(milliseconds=key[0]), key[1])
        except OverflowError:  # past year 9999 or before year 1: not one this list gave out
            raise invalid([field_error("after", pages.NOT_OURS, "query")]) from None
    docs, more = messages_page(
        b.db,
        user_id,
        limit=page.limit,
        start=start,
        end=end,
        status=None if status is None else Status(status).value,
        after=after,
    )
    devices = device_ids(b.db, docs)
    cursor = None
    if more:
        last = docs[-1]
        ms = int((last["scheduledAt"] - EPOCH).total_seconds() * 1000)
        cursor = pages.encode("messages", [ms, last["_id"]])
    params = {"status": status, "since": since, "until": until, "limit": page.limit}
    return MessagePage(
        items=[message_out(d, devices) for d in docs],
        next=pages.next_link(request, params, cursor),
    )


@router.read("/v1/messages/{messageId}", MessageOut, "One message")
def get_message(message_id: MessageId, b: BackendDep, _: AppCaller) -> MessageOut:
    doc = reads.message(b.db, message_id)
    if doc is None:
        raise ApiProblem(404, f"no message {shown(message_id)}")
    return message_out(doc, device_ids(b.db, [doc]))
