"""Erasure leaves nothing personal anywhere: after ``DELETE /v1/users/{id}`` no collection of
the database holds the user's id, zone, labels, texts, device or token, and an Idempotency-Key
answer that held them is gone too (the same POST sent again is a 404, not the erased reminder).
The one thing kept is the bare id with its erasure stamp in the intent-change log, which expires
after a week (docs/api.md)."""

from __future__ import annotations

import json
from unittest.mock import ANY

from shared.domain.messages import Status
from shared.store import db as dbm
from tests.integration.test_api_support import plan_window, prepare, soon_hhmm

USER = "zq-erase-me-user"
PERSONAL = {
    "user id": USER,
    "label": "zq-label-ibuprofen",
    "title": "zq-title-take-it",
    "body": "zq-body-with-water",
    "data": "zq-data-value",
    "device id": "zq-device-pixel",
    "token": "ExponentPushToken[zq-token-secret]",
}


def test_an_erased_user_leaves_no_string_of_theirs_in_any_collection(api, db):
    prepare(db)
    with api.client("app") as app:
        path = f"/v1/users/{USER}"
        assert app.put(path, json={"timezone": "Pacific/Chatham"}).status_code == 200
        login = app.put(
            f"{path}/devices/{PERSONAL['device id']}", json={"token": PERSONAL["token"]}
        )
        assert login.status_code == 200, login.text
        reminder = {
            "category": "medication",
            "label": PERSONAL["label"],
            "at": soon_hhmm("Pacific/Chatham"),
            "title": PERSONAL["title"],
            "body": PERSONAL["body"],
            "data": {"note": PERSONAL["data"]},
        }
        headers = {"Idempotency-Key": "zq-key-1"}
        made = app.post(f"{path}/reminders", json=reminder, headers=headers)
        assert made.status_code == 201, made.text
        plan_window(api, db)
        assert db["notification_messages"].count_documents({"status": Status.PENDING.value}) == 1

        assert app.delete(path).status_code in (200, 204)

        found = []
        for name in db.list_collection_names():
            for doc in db[name].find():
                if name == dbm.CHANGES and doc == {"_id": USER, "at": ANY, "erasedAt": ANY}:
                    continue  # the stamp docs/api.md names, checked below
                text = json.dumps(doc, default=str)
                found += [(name, what) for what, value in PERSONAL.items() if value in text]
        assert found == [], f"left after the erasure: {found}"
        # The one thing kept: the bare id with its erasure stamp, for whatever read the user
        # before the erasure (a planning, a consumer's batch), and it expires.
        ttl = {i["name"]: i for i in db[dbm.CHANGES].list_indexes()}["erased_expire"]
        assert ttl["key"] == {"erasedAt": 1} and ttl["expireAfterSeconds"] == dbm.ERASED_KEPT_S
        again = app.post(f"{path}/reminders", json=reminder, headers=headers)
        assert again.status_code == 404, again.text
