"""Two reminders of one user with the same category, label and time are two intents: both are
planned and both are sent (an occurrence is a reminder's, so the pending index names the
reminder). Before, the unique index on (instant, user, device, category, label) let one of them
be accepted (201) and then silently dropped at every planning."""

from __future__ import annotations

import datetime as dt

from shared.domain.messages import Status
from shared.store import db as dbm
from tests.integration.test_api_support import plan_window, prepare, soon_hhmm

TOKEN = "ExponentPushToken[twin-device]"


def test_two_reminders_alike_but_for_their_ids_are_both_planned(api, db):
    prepare(db)
    with api.client("app") as app:
        assert app.put("/v1/users/u1", json={"timezone": "Asia/Tashkent"}).status_code == 200
        assert app.put("/v1/users/u1/devices/d1", json={"token": TOKEN}).status_code == 200
        body = {"category": "medication", "label": "pill", "at": soon_hhmm("Asia/Tashkent")}
        for rid in ("pill-morning-a", "pill-morning-b"):
            made = app.put(f"/v1/users/u1/reminders/{rid}", json={**body, "title": rid})
            assert made.status_code in (200, 201), made.text
    plan_window(api, db)
    pending = list(db[dbm.MESSAGES].find({"userId": "u1", "status": Status.PENDING.value}))
    by_reminder: dict[str, list[dt.datetime]] = {}
    for m in pending:
        by_reminder.setdefault(m["reminderId"], []).append(m["scheduledAt"])
    assert sorted(by_reminder) == ["pill-morning-a", "pill-morning-b"], pending
    assert by_reminder["pill-morning-a"] == by_reminder["pill-morning-b"]


def test_the_old_pending_index_is_replaced_where_it_exists(db):
    old_keys = [
        ("scheduledAt", 1),
        ("userId", 1),
        ("notificationTokenId", 1),
        ("category", 1),
        ("label", 1),
    ]
    db[dbm.MESSAGES].create_index(
        old_keys,
        name="pending_occurrence_unique",
        unique=True,
        partialFilterExpression={"status": "pending", "isDeleted": False},
    )
    dbm.ensure_indexes(db)
    names = {ix["name"] for ix in db[dbm.MESSAGES].list_indexes()}
    assert "pending_occurrence_unique" not in names and dbm.PENDING_UNIQUE in names
