"""Pure planning: documents per occurrence and token, deterministic ids, wake-up grouping."""

from __future__ import annotations

import datetime as dt

from shared.domain.plan import group_wakeups, message_id, plan_checked, user_accepts

NOW = dt.datetime(2026, 10, 24, 0, 0, tzinfo=dt.UTC)


def reminder(
    rid: str = "r1", user: str = "u1", at: str = "18:00", **kw: object
) -> dict[str, object]:
    return {
        "_id": rid,
        "userId": user,
        "category": "medication",
        "label": "pill",
        "time": at,
        "offsetMinutes": 5,
        "weekdays": None,
        "active": True,
        "isDeleted": False,
        "version": 3,
    } | kw


USERS = {
    "u1": {"_id": "u1", "timezone": "Europe/Berlin"},
    "u2": {"_id": "u2", "timezone": "Asia/Tashkent"},
}
TOKENS = {
    "u1": [
        {"_id": "t1", "token": "ExponentPushToken[a]"},
        {"_id": "t2", "token": "ExponentPushToken[b]"},
    ],
    "u2": [{"_id": "t3", "token": "ExponentPushToken[c]"}],
}


def test_one_message_per_occurrence_and_token_with_deterministic_ids() -> None:
    docs = plan_checked(
        [reminder(), reminder("r2", "u2")], USERS, TOKENS, NOW, NOW + dt.timedelta(days=2), NOW
    ).messages
    assert len(docs) == 2 * 2 + 2 * 1
    ids = {d["_id"] for d in docs}
    assert message_id("r1", 3, "t1", dt.date(2026, 10, 24)) in ids
    berlin = sorted(d["scheduledAt"] for d in docs if d["notificationTokenId"] == "t1")
    # 18:05 CEST then 18:05 CEST again on the 25th? No: the 25th is after the fall-back, CET.
    assert berlin == [
        dt.datetime(2026, 10, 24, 16, 5, tzinfo=dt.UTC),
        dt.datetime(2026, 10, 25, 17, 5, tzinfo=dt.UTC),
    ]
    again = plan_checked(
        [reminder(), reminder("r2", "u2")], USERS, TOKENS, NOW, NOW + dt.timedelta(days=2), NOW
    ).messages
    assert [d["_id"] for d in again] == [d["_id"] for d in docs]


def test_inactive_deleted_opted_out_and_tokenless_plan_nothing() -> None:
    users = USERS | {
        "u3": {"_id": "u3", "timezone": "UTC", "prefs": {"enabled": False}},
        "u4": {"_id": "u4", "timezone": "UTC", "prefs": {"categories": {"medication": False}}},
    }
    tokens = TOKENS | {"u3": TOKENS["u1"], "u4": TOKENS["u1"]}
    rs = [
        reminder(active=False),
        reminder("r2", isDeleted=True),
        reminder("r3", "u3"),
        reminder("r4", "u4"),
        reminder("r5", "nobody"),
    ]
    assert plan_checked(rs, users, tokens, NOW, NOW + dt.timedelta(days=1), NOW).messages == []
    assert not user_accepts(users["u3"], "meal") and user_accepts(users["u1"], "meal")


def test_wakeups_group_by_category_window_and_size() -> None:
    base = NOW
    docs = []
    for i in range(7):
        docs.append(
            {
                "_id": f"m{i}",
                "category": "meal" if i < 5 else "mood",
                "scheduledAt": base + dt.timedelta(seconds=10 * i),
                "userId": "u",
                "reminderId": "r",
                "notificationTokenId": "t",
                "token": "x",
            }
        )
    docs.append(
        {
            "_id": "late",
            "category": "meal",
            "scheduledAt": base + dt.timedelta(minutes=5),
            "userId": "u",
            "reminderId": "r",
            "notificationTokenId": "t",
            "token": "x",
        }
    )
    ws = group_wakeups(docs, size=3, window_s=60, planned_at=NOW)
    shape = [(w.category, [i.id for i in w.items]) for w in ws]
    assert shape == [
        ("meal", ["m0", "m1", "m2"]),
        ("meal", ["m3", "m4"]),
        ("meal", ["late"]),
        ("mood", ["m5", "m6"]),
    ]
    again = group_wakeups(list(reversed(docs)), size=3, window_s=60, planned_at=NOW)
    assert [w.id for w in again] == [w.id for w in ws]


def test_one_bad_reminder_or_user_is_skipped_and_the_rest_is_planned() -> None:
    """Issue 15: a bad zone, ``8:00``, weekday 7 or no label once made the whole call raise."""
    users = USERS | {"mars": {"_id": "mars", "timezone": "Mars/Olympus_Mons"}}
    tokens = TOKENS | {"mars": [{"_id": "t9", "token": "ExponentPushToken[m]"}]}
    no_label = reminder("r-label")
    del no_label["label"]
    rs = [
        reminder("r-zone", "mars"),
        reminder("r-time", at="8:00"),
        reminder("r-day", weekdays=[0, 7]),
        no_label,
        reminder("good"),
    ]
    docs = plan_checked(rs, users, tokens, NOW, NOW + dt.timedelta(days=1), NOW).messages
    assert {d["reminderId"] for d in docs} == {"good"}
    assert len(docs) == 2  # one occurrence, u1's two tokens
