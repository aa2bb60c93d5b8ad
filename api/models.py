"""The JSON of the API: camelCase like the documents, strict types, unknown fields refused.

Request models check what they can alone (``api.checks``: the CLI's rules), the configured
categories included (``api.checks.CONFIGURED_CATEGORIES``, set for each request). Response
models are what the OpenAPI document promises, and the fuzz test holds every answer to them.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    WrapSerializer,
    field_validator,
)
from pydantic.alias_generators import to_camel

from api import checks
from shared.domain.localtime import MAX_OFFSET_MINUTES
from shared.domain.validation import MAX_DAILY_CAP, MAX_LABEL_LENGTH

Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
HHMM = Annotated[
    str,
    Field(examples=["08:00"], json_schema_extra={"pattern": r"^([01][0-9]|2[0-3]):[0-5][0-9]$"}),
    AfterValidator(checks.check_hhmm),
]
Timezone = Annotated[
    str,
    Field(min_length=1, max_length=64, examples=["Europe/Berlin"]),
    AfterValidator(checks.check_timezone),
]
Label = Annotated[
    str, Field(min_length=1, max_length=MAX_LABEL_LENGTH), AfterValidator(checks.check_label)
]
Text = Annotated[str, Field(max_length=checks.MAX_TEXT), AfterValidator(checks.check_text)]
Data = Annotated[dict[str, Any], AfterValidator(checks.check_data)]
Category = Annotated[
    str,
    Field(min_length=1, max_length=32, examples=["meal"]),
    AfterValidator(checks.check_category),
]
Offset = Annotated[int, Field(ge=-MAX_OFFSET_MINUTES, le=MAX_OFFSET_MINUTES)]
Weekdays = Annotated[list[Weekday], Field(max_length=7), AfterValidator(checks.check_weekdays)]
Token = Annotated[
    str,
    Field(min_length=1, max_length=256, examples=["ExponentPushToken[xxxxxxxxxxxxxxxxxxxxxx]"]),
    AfterValidator(checks.check_token),
]
Id = Annotated[
    str,
    Field(max_length=128, json_schema_extra={"pattern": checks.ID_PATTERN}),
    AfterValidator(checks.check_id),
]
DailyCap = Annotated[int, Field(ge=1, le=MAX_DAILY_CAP)]
Instant = Annotated[
    str,
    Field(min_length=1, max_length=64, examples=["2026-05-01T08:00Z"]),
    AfterValidator(checks.check_instant),
]


def _to_ms(value: Any, handler: Any) -> Any:
    """An instant as the database keeps it: to the millisecond (a document just written, still
    in memory with microseconds, reads the same as when it is read back)."""
    if isinstance(value, dt.datetime) and value.microsecond % 1000:
        value = value.replace(microsecond=value.microsecond - value.microsecond % 1000)
    return handler(value)


Stamp = Annotated[dt.datetime, WrapSerializer(_to_ms)]
"""Every instant an answer shows."""


class ApiModel(BaseModel):
    """Requests: camelCase, strict JSON types (no "5" for 5), no unknown field."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True
    )


class OutModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


# -- users -----------------------------------------------------------------------------------
class QuietHours(ApiModel):
    """No push between ``start`` and ``end``, local time (may wrap midnight)."""

    start: HHMM
    end: HHMM


class UserIn(ApiModel):
    """A user as a whole (PUT replaces): a category left out is on."""

    timezone: Timezone
    enabled: bool = True
    categories: dict[Category, bool] = Field(default_factory=dict, max_length=64)
    quiet_hours: QuietHours | None = None
    daily_cap: DailyCap | None = None


class QuietHoursOut(OutModel):
    start: str
    end: str


class UserOut(OutModel):
    id: str
    timezone: str
    enabled: bool
    categories: dict[str, bool] = Field(description="every configured category, on or off")
    quiet_hours: QuietHoursOut | None
    daily_cap: int | None
    created_at: Stamp | None
    updated_at: Stamp | None


# -- devices ---------------------------------------------------------------------------------
class DeviceIn(ApiModel):
    token: Token


class DeviceOut(OutModel):
    registration_id: str
    user_id: str
    device_id: str
    token: str
    active: bool
    created_at: Stamp | None


# -- reminders -------------------------------------------------------------------------------
class ReminderIn(ApiModel):
    """A reminder as a whole (PUT replaces, POST creates)."""

    category: Category
    label: Label
    at: HHMM = Field(description="local time of day, HH:MM")
    offset_minutes: Offset = 0
    weekdays: Weekdays | None = Field(default=None, description="null: every day")
    title: Text | None = None
    body: Text | None = None
    data: Data | None = None
    active: bool = True


class ReminderPatch(ApiModel):
    """The fields to change; null clears weekdays, title, body and data."""

    category: Category | None = None
    label: Label | None = None
    at: HHMM | None = None
    offset_minutes: Offset | None = None
    weekdays: Weekdays | None = None
    title: Text | None = None
    body: Text | None = None
    data: Data | None = None
    active: bool | None = None

    @field_validator("category", "label", "at", "offset_minutes", "active", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        """Only a null given is refused (a field left out is not validated): each is named."""
        if value is None:
            raise ValueError("cannot be null")
        return value


class OccurrenceOut(OutModel):
    at: Stamp
    status: str
    reason: str | None


class ReminderOut(OutModel):
    id: str
    user_id: str
    category: str
    label: str
    at: str
    offset_minutes: int
    weekdays: list[str] | None
    title: str | None
    body: str | None
    data: dict[str, Any] | None
    active: bool
    version: int
    created_at: Stamp | None
    updated_at: Stamp | None
    next_occurrence_at: Stamp | None = Field(
        description="the rule's next instant (UTC); null when paused. Preferences, quiet hours "
        "and the daily cap are judged at send time"
    )
    next_occurrence_local: Stamp | None = Field(
        description="the same instant in the user's zone, with its offset"
    )
    last_occurrence: OccurrenceOut | None = Field(
        description="the latest message due by now: when, its status, and why"
    )


class Page(OutModel):
    next: str | None = Field(description="the next page's URL, or null on the last page")


class ReminderPage(Page):
    items: list[ReminderOut]


class DevicePage(Page):
    items: list[DeviceOut]


# -- messages --------------------------------------------------------------------------------
class ReceiptOut(OutModel):
    state: str | None
    error: str | None = None


class MessageOut(OutModel):
    id: str
    user_id: str | None
    reminder_id: str | None
    device_id: str | None
    category: str | None
    label: str | None
    title: str | None
    body: str | None
    status: str | None
    reason: str | None
    scheduled_at: Stamp | None
    local_date: str | None
    timezone: str | None
    sent_at: Stamp | None
    finished_at: Stamp | None
    lateness_ms: int | None
    attempts: int | None
    receipt: ReceiptOut | None
    replayed: bool
    erased_at: Stamp | None = Field(
        default=None, description="when the user was erased (the message anonymised), or null"
    )


class MessagePage(Page):
    items: list[MessageOut]


# -- operators -------------------------------------------------------------------------------
class ReplayIn(ApiModel):
    """Which messages to replay (empty: every one of ``status``), and whether to only list."""

    status: Literal["is_missed", "failed"] = "is_missed"
    causes: list[Literal["credentials", "expo-down"]] = Field(default_factory=list)
    since: Instant | None = Field(default=None, description="due at or after (ISO 8601)")
    until: Instant | None = Field(default=None, description="due before (ISO 8601)")
    categories: list[Category] = Field(default_factory=list, max_length=64)
    users: list[Id] = Field(default_factory=list, max_length=1000)
    ids: list[Annotated[str, Field(min_length=1, max_length=512)]] = Field(
        default_factory=list, max_length=10_000
    )
    dry_run: bool = False
    reason: Annotated[str, Field(min_length=1, max_length=200)] = "replay through the API"


class ReplayedMessage(OutModel):
    id: str
    user_id: str | None
    category: str | None
    scheduled_at: Stamp | None
    reason: str | None


class ReplayOut(OutModel):
    dry_run: bool
    selected: int
    messages: list[ReplayedMessage] = Field(description="the first 1000 selected")
    counts: dict[str, int] = Field(
        description="`queued` (to the consumers, which send them), and what was skipped or "
        "left as it was (empty in a dry run)"
    )


class Health(OutModel):
    ok: bool
    problems: dict[str, str] = Field(default_factory=dict)
