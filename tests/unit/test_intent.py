"""Send-time intent decisions: each reason a planned push must not go out."""

from __future__ import annotations

import dataclasses

from shared.domain.intent import full_reason, in_quiet_hours, snapshot_reason
from shared.wire import Item

# 2026-10-24T16:05Z is 18:05 in Berlin.
ITEM = Item(
    id="m",
    due_ms=1_792_857_900_000,
    user="u",
    reminder="r",
    version=2,
    token_id="t",
    to="ExponentPushToken[x]",
    tz="Europe/Berlin",
)
USER = {"_id": "u", "timezone": "Europe/Berlin", "prefs": {"enabled": True}}
REM = {"_id": "r", "version": 2, "active": True, "isDeleted": False}
TOK = {"_id": "t", "isActive": True}


def test_all_clear() -> None:
    assert ITEM.due.isoformat() == "2026-10-24T16:05:00+00:00"
    assert full_reason(ITEM, "meal", USER, REM, TOK) is None


def test_user_gone_or_opted_out() -> None:
    assert full_reason(ITEM, "meal", None, REM, TOK) == "user no longer exists"
    off = USER | {"prefs": {"enabled": False}}
    assert full_reason(ITEM, "meal", off, REM, TOK) == "user turned notifications off"
    cat_off = USER | {"prefs": {"categories": {"meal": False}}}
    assert full_reason(ITEM, "meal", cat_off, REM, TOK) == "user turned off meal notifications"
    assert full_reason(ITEM, "mood", cat_off, REM, TOK) is None


def test_reminder_removed_paused_or_moved() -> None:
    assert full_reason(ITEM, "meal", USER, None, TOK) == "reminder removed"
    assert full_reason(ITEM, "meal", USER, REM | {"isDeleted": True}, TOK) == "reminder removed"
    assert full_reason(ITEM, "meal", USER, REM | {"active": False}, TOK) == "reminder paused"
    assert "moved or edited" in (full_reason(ITEM, "meal", USER, REM | {"version": 3}, TOK) or "")


def test_zone_change_and_dead_token() -> None:
    assert "time zone changed" in (
        full_reason(ITEM, "meal", USER | {"timezone": "UTC"}, REM, TOK) or ""
    )
    dead = {"_id": "t", "isActive": False, "deactivationReason": "DeviceNotRegistered"}
    assert (
        full_reason(ITEM, "meal", USER, REM, dead) == "token no longer active (DeviceNotRegistered)"
    )


def test_quiet_hours_wrap_midnight_and_use_local_time() -> None:
    assert in_quiet_hours(ITEM, ["18:00", "19:00"])  # 18:05 local
    assert not in_quiet_hours(ITEM, ["16:00", "17:00"])  # 16:05 is UTC, not local
    assert in_quiet_hours(ITEM, ["17:00", "07:00"])
    assert not in_quiet_hours(ITEM, ["22:00", "07:00"])
    quiet_user = USER | {"prefs": {"quietHours": ["18:00", "18:30"]}}
    assert (
        full_reason(ITEM, "meal", quiet_user, REM, TOK) == "quiet hours 18:00-18:30 (Europe/Berlin)"
    )
    assert snapshot_reason(ITEM) is None
    assert snapshot_reason(dataclasses.replace(ITEM, quiet=["18:00", "18:30"])) == (
        "quiet hours 18:00-18:30 (Europe/Berlin)"
    )


def test_a_user_read_and_found_again_is_the_same_user_at_the_databases_precision() -> None:
    """A user document written from Python holds microseconds, the database keeps milliseconds:
    the creation that wrote it and the look that reads it back must agree it is the same user
    (else every batch that creates users would undo its own logins). Another millisecond is
    another user (erased and created again); a naive instant is UTC."""
    import datetime as dt

    from shared.store.erasure import same_user

    written = dt.datetime(2026, 12, 2, 12, 0, 0, 123456, tzinfo=dt.UTC)
    stored = dt.datetime(2026, 12, 2, 12, 0, 0, 123000, tzinfo=dt.UTC)
    assert same_user(written, stored)
    assert same_user(written, stored.replace(tzinfo=None))
    assert not same_user(written, stored + dt.timedelta(milliseconds=1))
    assert same_user(None, None)  # written by hand without one: only a missing user is seen
    assert not same_user(None, stored)
