"""Issue 15: the document checks every stage shares, and planning that skips what they refuse.

One rule per kind of document (``shared.domain.validation``): the planner skips a reminder, user
or token it refuses and says why; the management commands refuse the same values where they
enter; ``tzpush doctor`` lists what the rule refuses.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace as dataclass_replace

import pytest

from shared.domain.plan import plan_checked
from shared.domain.validation import (
    MAX_ID_LENGTH,
    BadDocument,
    message_problem,
    receipt_problem,
    reminder_problem,
    token_problem,
    user_problem,
    validate_daily_cap,
    validate_id,
    validate_label,
)
from shared.errors import InputError

NOW = dt.datetime(2026, 10, 24, 0, 0, tzinfo=dt.UTC)
CATEGORIES = ("meal", "medication")


def reminder(rid: str = "r1", user: str = "u1", **kw: object) -> dict[str, object]:
    return {
        "_id": rid,
        "userId": user,
        "category": "meal",
        "label": "lunch",
        "time": "12:30",
        "offsetMinutes": 0,
        "weekdays": None,
        "title": "Lunch",
        "body": None,
        "data": None,
        "active": True,
        "isDeleted": False,
        "version": 1,
    } | kw


USER = {"_id": "u1", "timezone": "Europe/Berlin", "prefs": {"enabled": True}, "dailyCap": None}
TOKEN = {"_id": "t1", "userId": "u1", "token": "ExponentPushToken[a]", "isActive": True}


def test_a_sound_reminder_user_and_token_pass() -> None:
    assert reminder_problem(reminder(), CATEGORIES) is None
    assert reminder_problem(reminder(weekdays=[0, 6], offsetMinutes=-5, data={"k": 1})) is None
    assert user_problem(USER) is None
    assert user_problem({"_id": "u2", "timezone": "UTC"}) is None
    assert user_problem(USER | {"prefs": {"quietHours": ["22:00", "07:00"]}, "dailyCap": 3}) is None
    assert token_problem(TOKEN) is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"time": "8:00"}, "'8:00'"),
        ({"time": None}, "time"),
        ({"weekdays": [0, 7]}, "weekday"),
        ({"weekdays": []}, "weekdays"),
        ({"weekdays": "mon"}, "weekdays"),
        ({"label": None}, "label"),
        ({"label": ""}, "label"),
        ({"label": "x" * 101}, "label"),
        ({"category": None}, "category"),
        ({"category": "bowling"}, "'bowling' is not configured"),
        ({"userId": None}, "userId"),
        ({"offsetMinutes": "5"}, "offsetMinutes"),
        ({"offsetMinutes": 100_000}, "offsetMinutes"),
        ({"version": "two"}, "version"),
        ({"title": 5}, "title"),
        ({"data": [1, 2]}, "data"),
        ({"data": {"at": NOW}}, "data"),
        ({"_id": "r\x00"}, "_id"),
    ],
)
def test_each_bad_reminder_field_is_named(change: dict[str, object], words: str) -> None:
    problem = reminder_problem(reminder(**change), CATEGORIES)
    assert problem is not None and words in problem


def test_a_missing_field_is_named() -> None:
    r = reminder()
    del r["label"]
    assert "label" in (reminder_problem(r) or "")


@pytest.mark.parametrize(
    ("user", "words"),
    [
        (USER | {"timezone": "Mars/Olympus_Mons"}, "Mars/Olympus_Mons"),
        ({"_id": "u1"}, "timezone"),
        (USER | {"prefs": "on"}, "prefs"),
        (USER | {"prefs": {"categories": ["meal"]}}, "categories"),
        (USER | {"prefs": {"quietHours": ["22:00"]}}, "quietHours"),
        (USER | {"prefs": {"quietHours": ["25:00", "07:00"]}}, "quietHours"),
        (USER | {"dailyCap": "3"}, "dailyCap"),
        (USER | {"dailyCap": 0}, "dailyCap"),
        (USER | {"dailyCap": True}, "dailyCap"),
    ],
)
def test_each_bad_user_field_is_named(user: dict[str, object], words: str) -> None:
    assert words in (user_problem(user) or "")


def test_bad_tokens_and_messages_are_named() -> None:
    assert "token" in (token_problem(TOKEN | {"token": 5}) or "")
    assert "_id" in (token_problem(TOKEN | {"_id": "t\n1"}) or "")
    msg = {"_id": "m1", "category": "meal", "scheduledAt": NOW, "plannedAt": NOW}
    assert message_problem(msg) is None
    assert "category" in (message_problem({k: v for k, v in msg.items() if k != "category"}) or "")
    assert "plannedAt" in (message_problem(msg | {"plannedAt": "yesterday"}) or "")
    sent = {"_id": "m1", "ticketId": "abc-1", "notificationTokenId": "t1", "userId": "u1"}
    assert receipt_problem(sent | {"sentAt": NOW}) is None
    assert "ticketId" in (receipt_problem(sent | {"ticketId": 123}) or "")
    assert "notificationTokenId" in (receipt_problem({"_id": "m1", "ticketId": "abc"}) or "")
    assert "sentAt" in (receipt_problem(sent | {"sentAt": "now"}) or "")


def test_plan_checked_skips_what_is_bad_once_and_says_why() -> None:
    users = {"u1": USER, "mars": {"_id": "mars", "timezone": "Mars/Olympus_Mons"}}
    tokens = {
        "u1": [TOKEN, TOKEN | {"_id": "t-bad", "token": None}],
        "mars": [TOKEN | {"_id": "t2", "userId": "mars"}],
    }
    rs = [
        reminder("good"),
        reminder("r-zone", "mars"),
        reminder("r-zone2", "mars", label="dinner"),
        reminder("r-time", time="8:00"),
        reminder("r-cat", category="bowling"),
    ]
    plan = plan_checked(
        rs, users, tokens, NOW, NOW + dt.timedelta(days=1), NOW, categories=CATEGORIES
    )
    assert [(d["reminderId"], d["notificationTokenId"]) for d in plan.messages] == [("good", "t1")]
    skipped = {(b.kind, b.id): b.problem for b in plan.skipped}
    assert set(skipped) == {
        ("user", "mars"),
        ("token", "t-bad"),
        ("reminder", "r-time"),
        ("reminder", "r-cat"),
    }
    assert "Mars/Olympus_Mons" in skipped[("user", "mars")]
    assert "'8:00'" in skipped[("reminder", "r-time")]
    assert all(isinstance(b, BadDocument) for b in plan.skipped)
    bad_time = next(b for b in plan.skipped if b.id == "r-time")
    assert bad_time.describe().startswith("reminder r-time: time '8:00' is not")


@pytest.mark.parametrize(
    "value",
    ["", "u\x07", "u\x00x", "a b", "tab\there", "new\nline", "x" * (MAX_ID_LENGTH + 1), 5, None],
)
def test_ids_must_be_printable_without_spaces_and_bounded(value: object) -> None:
    with pytest.raises(InputError) as info:
        validate_id(value, "user id")  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith("user id ")
    assert "\n" not in message and "\x07" not in message and "\x00" not in message


def test_good_ids_pass_as_typed() -> None:
    for value in ("u1", "user-42@example.com", "[bold]u[/]", "José", "x" * MAX_ID_LENGTH):
        assert validate_id(value, "user id") == value


def test_labels_and_daily_caps_are_checked_at_entry() -> None:
    assert validate_label("[/x] pill") == "[/x] pill"
    for bad in ("", "   ", "a\x1b[31m", "x" * 101):
        with pytest.raises(InputError, match="label"):
            validate_label(bad)
    assert validate_daily_cap(5) == 5
    for cap in (0, -1, 10**30, True, 1.5):
        with pytest.raises(InputError, match="daily cap"):
            validate_daily_cap(cap)  # type: ignore[arg-type]


def test_the_intent_verdict_names_a_document_it_cannot_judge_instead_of_raising() -> None:
    """Issue 15: a ValueError here once dead-lettered a whole wake-up with its guards held."""
    from shared.domain.intent import verdict
    from shared.wire import Item

    item = Item(
        id="m1",
        due_ms=1_792_857_900_000,
        user="u1",
        reminder="r1",
        version=1,
        token_id="t1",
        to="ExponentPushToken[a]",
        tz="Europe/Berlin",
    )
    rem = {"_id": "r1", "version": 1, "active": True, "isDeleted": False}
    tok = {"_id": "t1", "isActive": True}
    fine = verdict(item, "meal", changed=True, user=USER, reminder=rem, token=tok)
    assert fine.reason is None and fine.bad is None
    junk = USER | {"prefs": {"quietHours": ["22:00"]}}
    bad = verdict(item, "meal", changed=True, user=junk, reminder=rem, token=tok).bad
    assert bad is not None and (bad.kind, bad.id) == ("user", "u1") and "quietHours" in bad.problem
    odd = verdict(item, "meal", changed=True, user=USER, reminder=rem | {"version": "x"}, token=tok)
    assert odd.bad is not None and odd.bad.kind == "message"
    snap = verdict(dataclass_replace(item, tz="Mars/Olympus_Mons"), "meal", changed=False)
    assert snap.bad is not None and "Mars/Olympus_Mons" in snap.bad.problem
    assert verdict(dataclass_replace(item, quiet=["x"]), "meal", changed=False).bad is not None


def test_a_push_token_with_a_control_character_is_refused() -> None:
    from shared.domain.validation import is_expo_token, validate_expo_token

    assert not is_expo_token("ExponentPushToken[ab\x07c]")
    with pytest.raises(InputError, match=r"\\x07"):
        validate_expo_token("ExponentPushToken[ab\x07c]")
