"""A replay judges a missed message at its own instant, in the user's zone (domain.replay)."""

from __future__ import annotations

import datetime as dt

from shared.domain.replay import Verdict, at_replay, judge
from shared.wire import Item

UTC = dt.UTC
# Due 2026-10-24T16:05Z: 01:05 on the 25th in Tokyo.
ITEM = Item(
    id="m",
    due_ms=1_792_857_900_000,
    user="u",
    reminder="r",
    version=1,
    token_id="t",
    to="ExponentPushToken[x]",
    local_date="2026-10-25",
    tz="Asia/Tokyo",
)
REM = {"_id": "r", "version": 1, "active": True, "isDeleted": False}
TOK = {"_id": "t", "isActive": True}


def user(quiet: list[str] | None = None, **extra: object) -> dict[str, object]:
    return {"_id": "u", "timezone": "Asia/Tokyo", "prefs": {"quietHours": quiet}, **extra}


def test_quiet_hours_are_those_of_the_replay_instant_not_of_the_due_instant() -> None:
    night = user(["22:00", "07:00"])
    # The due instant (01:05 Tokyo) was inside quiet hours; a replay at 12:00 Tokyo sends.
    noon = dt.datetime(2026, 10, 25, 3, 0, tzinfo=UTC)
    assert judge(ITEM, "meal", (night, REM, TOK), noon) == (Verdict.SEND, None)
    # A replay at 03:00 Tokyo (18:00Z) is inside them, whatever the due instant was: later.
    three_am = dt.datetime(2026, 10, 25, 18, 0, tzinfo=UTC)
    verdict, why = judge(ITEM, "meal", (night, REM, TOK), three_am)
    assert verdict is Verdict.LATER
    assert why == "quiet hours 22:00-07:00 (Asia/Tokyo) at 03:00 local"


def test_what_the_user_no_longer_wants_is_cancelled_even_in_quiet_hours() -> None:
    three_am = dt.datetime(2026, 10, 25, 18, 0, tzinfo=UTC)
    night = user(["22:00", "07:00"])
    dead = {"_id": "t", "isActive": False, "deactivationReason": "unregistered"}
    assert judge(ITEM, "meal", (night, REM, dead), three_am) == (
        Verdict.CANCEL,
        "token no longer active (unregistered)",
    )
    assert judge(ITEM, "meal", (None, REM, TOK), three_am) == (
        Verdict.CANCEL,
        "user no longer exists",
    )
    moved = user(None) | {"timezone": "Europe/Paris"}
    assert judge(ITEM, "meal", (moved, REM, TOK), three_am)[0] is Verdict.CANCEL


def test_the_replay_counts_on_the_users_local_day_of_now() -> None:
    # 23:30Z on the 25th is already the 26th in Tokyo: the cap of the 26th is the one used.
    late = dt.datetime(2026, 10, 25, 23, 30, tzinfo=UTC)
    now_item = at_replay(ITEM, late, "Asia/Tokyo")
    assert now_item.local_date == "2026-10-26"
    assert now_item.due == late
    assert at_replay(ITEM, late, "America/Los_Angeles").local_date == "2026-10-25"
