"""Path and query parameters shared by the routes, checked by the CLI's rules (``api.checks``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Query
from pydantic import AfterValidator

from api import checks
from api.pages import DEFAULT_LIMIT, MAX_LIMIT

_RULE = "1 to 128 printable characters, no space, no /"


def _id_path(alias: str, what: str) -> Any:
    """A path id: documented by the rule, checked by ``checks.check_id`` (naming ``what``)."""
    return Path(
        alias=alias,
        max_length=128,
        description=f"{what}: {_RULE}",
        json_schema_extra={"pattern": checks.ID_PATTERN},
    )


def _id_check(what: str) -> AfterValidator:
    return AfterValidator(lambda v: checks.check_id(v, what))


UserId = Annotated[str, _id_path("userId", "user id"), _id_check("user id")]
DeviceId = Annotated[str, _id_path("deviceId", "device id"), _id_check("device id")]
ReminderId = Annotated[str, _id_path("reminderId", "reminder id"), _id_check("reminder id")]
MessageId = Annotated[
    str, Path(alias="messageId", min_length=1, max_length=512, description="a message id")
]
Limit = Annotated[
    int, Query(ge=1, le=MAX_LIMIT, description=f"items per page (at most {MAX_LIMIT})")
]
After = Annotated[
    str | None,
    Query(max_length=2048, description="the cursor of the previous page's `next` link"),
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=255,
        description="a unique key per creation: the same key and body within 24 h answer the "
        "same (no second reminder)",
    ),
]
DEFAULT = DEFAULT_LIMIT


@dataclass(frozen=True)
class PageQuery:
    """A list's ``limit`` and ``after`` (the cursor of the previous page's ``next`` link)."""

    limit: int
    after: str | None


def _page_query(limit: Limit = DEFAULT, after: After = None) -> PageQuery:
    return PageQuery(limit, after)


PageDep = Annotated[PageQuery, Depends(_page_query)]
