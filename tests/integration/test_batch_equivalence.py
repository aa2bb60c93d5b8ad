"""``POST /v1/batch`` against the single endpoints, differentially, through a real ``tzpush api``.

The claim (creator/upserts.py, api/routes_batch.py): a batch's answers and the database it
leaves are those of sending each item alone, in order, through ``PUT /v1/users/{u}``,
``PUT .../devices/{d}`` and ``PUT .../reminders/{r}``. Each case starts from the same world
(two users with a device each and planned messages, a reminder another user holds, a removed
reminder), applies a small random batch both ways, and compares the statuses and the documents:
users, registrations (active or not, with the reason), reminders with their versions, messages
with status and reason, and who was stamped in the change log. Generated ids and timestamps are
left out. The seeds are fixed, so a failure names a batch that can be replayed.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any

import httpx
import pytest
from pymongo.database import Database

from shared.clock import utcnow
from shared.store import db as dbm
from tests.integration.test_api_support import ApiServer, plan_window, prepare

Doc = dict[str, Any]
TZ = "Asia/Tashkent"
USERS = ["u1", "u2", "u3"]  # u3 does not exist at the start
DEVICES = ["d1", "d2", "d3"]
TOKENS = [f"ExponentPushToken[eq-{n}]" for n in ("1", "2", "3")]
REMINDERS = ["r1", "r2", "r3", "r4"]  # r1 and r3 (removed) are u1's, r2 is u2's, r4 is new
ZONES = [TZ, "Europe/Berlin", "Europe/Berln"]  # the last is refused
CASES = 32


def _hhmm(minutes: int) -> str:
    from zoneinfo import ZoneInfo

    return (utcnow() + dt.timedelta(minutes=minutes)).astimezone(ZoneInfo(TZ)).strftime("%H:%M")


SPECS = [
    {"category": "meal", "label": "lunch", "at": _hhmm(90)},
    {"category": "meal", "label": "dinner", "at": _hhmm(300), "title": "Dinner"},
    {"category": "meal", "label": "huge", "at": _hhmm(60), "body": "x" * 4100},  # refused: 422
]


def _reset(db: Database[Doc]) -> None:
    for name in db.list_collection_names():
        db[name].delete_many({})
    prepare(db)


def _seed(api: ApiServer, app: httpx.Client, db: Database[Doc]) -> None:
    """The world every case starts from, made through the single endpoints."""
    _reset(db)
    calls = [
        ("/v1/users/u1", {"timezone": TZ}),
        ("/v1/users/u2", {"timezone": TZ}),
        ("/v1/users/u1/devices/d1", {"token": TOKENS[0]}),
        ("/v1/users/u2/devices/d2", {"token": TOKENS[1]}),
        ("/v1/users/u1/reminders/r1", SPECS[0]),
        ("/v1/users/u2/reminders/r2", SPECS[0]),
        ("/v1/users/u1/reminders/r3", SPECS[1]),
    ]
    for path, body in calls:
        r = app.put(path, json=body)
        assert r.status_code in (200, 201), r.text
    assert app.delete("/v1/users/u1/reminders/r3").status_code == 204
    plan_window(api, db)


def _item(rng: random.Random) -> Doc:
    op = rng.choice(["user", "device", "device", "reminder", "reminder"])
    uid = rng.choice(USERS)
    if op == "user":
        return {"op": "user", "userId": uid, "user": {"timezone": rng.choice(ZONES)}}
    if op == "device":
        device = {"token": rng.choice(TOKENS)}
        return {"op": "device", "userId": uid, "deviceId": rng.choice(DEVICES), "device": device}
    rid = rng.choice(REMINDERS)
    return {"op": "reminder", "userId": uid, "reminderId": rid, "reminder": rng.choice(SPECS)}


def _single(app: httpx.Client, item: Doc) -> int:
    """The item through its own endpoint; the status."""
    uid = item["userId"]
    if item["op"] == "user":
        r = app.put(f"/v1/users/{uid}", json=item["user"])
    elif item["op"] == "device":
        r = app.put(f"/v1/users/{uid}/devices/{item['deviceId']}", json=item["device"])
    else:
        r = app.put(f"/v1/users/{uid}/reminders/{item['reminderId']}", json=item["reminder"])
    assert r.status_code < 500, r.text
    return r.status_code


def snapshot(db: Database[Doc]) -> Doc:
    """The documents, without generated ids and timestamps (a registration by its device and
    token string)."""
    tokens = list(db[dbm.TOKENS].find())
    install = {t["_id"]: (t["deviceId"], t["token"]) for t in tokens}
    inactive = {t["_id"] for t in tokens if not t["isActive"]}
    users = sorted(
        json.dumps(
            {k: v for k, v in u.items() if k not in ("createdAt", "updatedAt")}, sort_keys=True
        )
        for u in db[dbm.USERS].find()
    )
    regs = sorted(
        (t["userId"], t["deviceId"], t["token"], t["isActive"], t.get("deactivationReason"))
        for t in tokens
    )
    reminders = sorted(
        json.dumps(
            {k: v for k, v in r.items() if k not in ("createdAt", "updatedAt")}, sort_keys=True
        )
        for r in db[dbm.REMINDERS].find()
    )
    messages = sorted(
        (
            m["userId"],
            m["reminderId"],
            m["reminderVersion"],
            install.get(m["notificationTokenId"]),
            m["scheduledAt"].isoformat(),
            m["status"],
            m.get("reason"),
        )
        for m in db[dbm.MESSAGES].find()
        # A batch plans after its logins: a message planned, alone, on an install that a later
        # item logged another user into is never made; alone, the consumer cancels it ("token
        # replaced") at its due time. Nothing reaches anyone either way.
        if not (m["status"] == "pending" and m["notificationTokenId"] in inactive)
    )
    # The change log makes consumers recheck what was planned before a change. The batch
    # stamps less than single calls do (nothing for what is only new); what must be stamped is
    # every user who lost a registration (their messages for it end "token replaced").
    stamped = {c["_id"] for c in db[dbm.CHANGES].find()}
    assert {t["userId"] for t in tokens if not t["isActive"]} <= stamped
    return {
        "users": users,
        "registrations": regs,
        "reminders": reminders,
        "messages": messages,
    }


@pytest.mark.parametrize("chunk", range(4))
def test_a_batch_answers_and_leaves_what_its_items_alone_would(api, db, chunk):
    with api.client("app") as app:
        for seed in range(chunk * CASES // 4, (chunk + 1) * CASES // 4):
            rng = random.Random(seed)
            items = [_item(rng) for _ in range(rng.randint(1, 6))]
            _seed(api, app, db)
            r = app.post("/v1/batch", json={"items": items})
            assert r.status_code == 200, r.text
            by_batch = [x["status"] for x in r.json()["results"]]
            after_batch = snapshot(db)
            _seed(api, app, db)
            alone = [_single(app, it) for it in items]
            after_alone = snapshot(db)
            shown = json.dumps(items, indent=1)
            assert by_batch == alone, f"seed {seed}: statuses differ for\n{shown}"
            for part, value in after_alone.items():
                assert after_batch[part] == value, f"seed {seed}: {part} differ for\n{shown}"
