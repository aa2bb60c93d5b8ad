"""tzpush api on the real stack: users, devices (a device passed between users), reminders
(client and server ids, Idempotency-Key, PATCH, pages, next and last occurrence), messages,
erasure, and the operators' stats and replays."""

from __future__ import annotations

import datetime as dt

import pytest

from shared.clock import utcnow
from shared.domain.messages import Status, terminal_update
from shared.store import db as dbm
from tests.integration.test_api_support import (
    consumer_burst,
    insert_missed,
    plan_window,
    prepare,
    soon_hhmm,
    utc,
)

TOKEN_A = "ExponentPushToken[device-a-token]"


@pytest.fixture
def app(api, db):
    prepare(db)
    api.fake.clear()
    with api.client("app") as c:
        yield c


def _user(app, uid, tz="Asia/Tashkent", **extra):
    r = app.put(f"/v1/users/{uid}", json={"timezone": tz, **extra})
    assert r.status_code == 200, r.text
    return r.json()


# -- users -----------------------------------------------------------------------------------
def test_put_get_user_replaces_the_whole_user(app, db):
    body = {
        "timezone": "Asia/Tashkent",
        "enabled": True,
        "categories": {"mood": False},
        "quietHours": {"start": "22:00", "end": "07:00"},
        "dailyCap": 5,
    }
    u = _user(app, "u1", **{k: v for k, v in body.items() if k != "timezone"})
    assert u["categories"]["mood"] is False and u["categories"]["meal"] is True
    assert u["quietHours"] == {"start": "22:00", "end": "07:00"} and u["dailyCap"] == 5
    again = app.get("/v1/users/u1").json()
    assert again == u
    # PUT replaces: what is left out goes back to its default
    u2 = _user(app, "u1", tz="Europe/Berlin")
    assert u2["categories"]["mood"] is True and u2["quietHours"] is None
    assert u2["dailyCap"] is None and u2["timezone"] == "Europe/Berlin"
    assert db[dbm.CHANGES].find_one({"_id": "u1"}) is not None  # consumers recheck at once


# -- devices ---------------------------------------------------------------------------------
def test_login_logout_and_a_device_passed_between_users(app, api, db):
    _user(app, "alice")
    _user(app, "bob")
    plan_window(api, db)
    hhmm = soon_hhmm("Asia/Tashkent")
    login = app.put("/v1/users/alice/devices/phone-1", json={"token": TOKEN_A})
    assert login.status_code == 200 and login.json()["active"] is True
    r = app.put(
        "/v1/users/alice/reminders/alice-lunch",
        json={"category": "meal", "label": "lunch", "at": hhmm},
    )
    assert r.status_code == 201, r.text
    pending = list(db[dbm.MESSAGES].find({"userId": "alice", "status": "pending"}))
    assert len(pending) == 1  # planned at once: the API's change re-plans the user
    # The same login again changes nothing.
    again = app.put("/v1/users/alice/devices/phone-1", json={"token": TOKEN_A}).json()
    assert again["registrationId"] == login.json()["registrationId"] and again["active"]
    # Bob logs in on Alice's phone: hers is deactivated, her pending message will not reach Bob.
    r = app.put("/v1/users/bob/devices/phone-1", json={"token": TOKEN_A})
    assert r.status_code == 200 and r.json()["userId"] == "bob"
    assert app.get("/v1/users/alice/devices").json()["items"] == []
    [bobs] = app.get("/v1/users/bob/devices").json()["items"]
    assert bobs["deviceId"] == "phone-1" and bobs["token"] == TOKEN_A
    old = db[dbm.TOKENS].find_one({"userId": "alice"})
    assert old["isActive"] is False and "token replaced" in old["deactivationReason"]
    assert db[dbm.CHANGES].find_one({"_id": "alice"}) is not None
    # A late logout by Alice does not log Bob out.
    assert app.delete("/v1/users/alice/devices/phone-1").status_code == 204
    assert len(app.get("/v1/users/bob/devices").json()["items"]) == 1
    assert app.delete("/v1/users/bob/devices/phone-1").status_code == 204
    assert app.get("/v1/users/bob/devices").json()["items"] == []
    assert app.delete("/v1/users/bob/devices/phone-1").status_code == 204  # twice is fine
    assert app.put("/v1/users/nobody/devices/d", json={"token": TOKEN_A}).status_code == 404


def test_devices_come_in_pages_like_every_list(app):
    _user(app, "u1")
    for i in range(5):
        token = f"ExponentPushToken[page-{i}]"
        assert app.put(f"/v1/users/u1/devices/d{i}", json={"token": token}).status_code == 200
    seen, url = [], "/v1/users/u1/devices?limit=2"
    while url:
        page = app.get(url).json()
        assert len(page["items"]) <= 2
        seen += [d["deviceId"] for d in page["items"]]
        url = page["next"]
    assert sorted(seen) == [f"d{i}" for i in range(5)] and len(seen) == 5
    assert app.get("/v1/users/u1/devices?after=bogus").status_code == 422
    assert app.get("/v1/users/nobody/devices").status_code == 404


# -- reminders -------------------------------------------------------------------------------
def test_put_with_a_client_id_is_idempotent_and_a_change_makes_a_new_version(app, api, db):
    _user(app, "u1")
    plan_window(api, db)
    app.put("/v1/users/u1/devices/d1", json={"token": TOKEN_A})
    hhmm = soon_hhmm("Asia/Tashkent")
    body = {"category": "meal", "label": "lunch", "at": hhmm, "title": "Lunch", "data": {"k": 1}}
    first = app.put("/v1/users/u1/reminders/lunch-u1", json=body)
    assert first.status_code == 201
    second = app.put("/v1/users/u1/reminders/lunch-u1", json=body)
    assert second.status_code == 200
    assert second.json()["version"] == first.json()["version"] == 1
    assert db[dbm.MESSAGES].count_documents({"reminderId": "lunch-u1"}) == 1
    r = first.json()
    nxt = utc(r["nextOccurrenceAt"])
    assert dt.timedelta(0) < nxt - utcnow() < dt.timedelta(hours=24)
    assert r["nextOccurrenceLocal"].endswith("+05:00")
    assert utc(r["nextOccurrenceLocal"]) == nxt and r["lastOccurrence"] is None
    changed = app.put("/v1/users/u1/reminders/lunch-u1", json={**body, "title": "Eat"})
    assert changed.status_code == 200 and changed.json()["version"] == 2
    statuses = {
        m["reminderVersion"]: (m["status"], m.get("reason"))
        for m in db[dbm.MESSAGES].find({"reminderId": "lunch-u1"})
    }
    assert statuses[1] == ("cancelled", "reminder replaced")
    assert statuses[2][0] == "pending"
    # A reminder id is global: another user cannot take it.
    _user(app, "u2")
    r = app.put("/v1/users/u2/reminders/lunch-u1", json=body)
    assert r.status_code == 409 and "another user" in r.json()["detail"]
    assert app.get("/v1/users/u2/reminders/lunch-u1").status_code == 404


def test_post_honours_the_idempotency_key(app, api):
    _user(app, "u1")
    body = {"category": "mood", "label": "check-in", "at": "09:00", "weekdays": ["fri", "mon"]}
    headers = {"Idempotency-Key": "create-1"}
    a = app.post("/v1/users/u1/reminders", json=body, headers=headers)
    b = app.post("/v1/users/u1/reminders", json=body, headers=headers)
    assert a.status_code == b.status_code == 201
    assert a.json()["id"] == b.json()["id"] and b.headers["idempotent-replayed"] == "true"
    assert a.json()["weekdays"] == ["mon", "fri"]
    other = app.post("/v1/users/u1/reminders", json={**body, "at": "10:00"}, headers=headers)
    assert other.status_code == 422 and other.json()["type"].endswith("idempotency-key-reused")
    # Another key, or none: a new reminder each time.
    c = app.post("/v1/users/u1/reminders", json=body, headers={"Idempotency-Key": "create-2"})
    d = app.post("/v1/users/u1/reminders", json=body)
    assert len({a.json()["id"], c.json()["id"], d.json()["id"]}) == 3
    # The same key from another API key is another request.
    with api.client("ops") as ops:
        e = ops.post("/v1/users/u1/reminders", json=body, headers=headers)
    assert e.status_code == 201 and e.json()["id"] != a.json()["id"]
    # A refused request leaves no record: corrected, it goes through under the same key.
    bad = app.post(
        "/v1/users/u1/reminders", json={**body, "at": "9"}, headers={"Idempotency-Key": "k3"}
    )
    assert bad.status_code == 422
    ok = app.post("/v1/users/u1/reminders", json=body, headers={"Idempotency-Key": "k3"})
    assert ok.status_code == 201
    r = app.post("/v1/users/u1/reminders", json=body, headers={"Idempotency-Key": "a b"})
    assert r.status_code == 422 and r.json()["errors"][0]["in"] == "header"


def test_patch_delete_get_and_list_pages(app):
    _user(app, "u1")
    ids = []
    for i in range(7):
        r = app.put(
            f"/v1/users/u1/reminders/r{i}",
            json={"category": "meal", "label": f"l{i}", "at": f"0{i}:15", "title": "t"},
        )
        ids.append(r.json()["id"])
    r = app.patch("/v1/users/u1/reminders/r3", json={"active": False, "title": None})
    assert r.status_code == 200, r.text
    p = r.json()
    assert p["active"] is False and p["title"] is None and p["at"] == "03:15"
    assert p["nextOccurrenceAt"] is None and p["version"] == 2
    r = app.patch("/v1/users/u1/reminders/r3", json={"at": None})
    assert r.status_code == 422 and r.json()["errors"][0]["name"] == "at"
    assert r.json()["detail"] == "cannot be null"
    assert app.delete("/v1/users/u1/reminders/r5").status_code == 204
    assert app.delete("/v1/users/u1/reminders/r5").status_code == 204
    assert app.get("/v1/users/u1/reminders/r5").status_code == 404
    assert app.patch("/v1/users/u1/reminders/r5", json={"label": "x"}).status_code == 404
    seen, url, pages = [], "/v1/users/u1/reminders?limit=2", 0
    while url:
        page = app.get(url).json()
        seen += [i["id"] for i in page["items"]]
        url, pages = page["next"], pages + 1
    assert seen == ["r0", "r1", "r2", "r3", "r4", "r6"] and pages == 3
    assert app.get("/v1/users/u1/reminders?limit=201").status_code == 422
    r = app.get("/v1/users/u1/reminders?after=garbage")
    assert r.status_code == 422 and r.json()["errors"][0]["name"] == "after"
    assert app.get("/v1/users/nobody/reminders").status_code == 404


def test_last_occurrence_and_messages_history(app, api, db):
    _user(app, "u1", tz="UTC")
    plan_window(api, db)
    app.put("/v1/users/u1/devices/d1", json={"token": TOKEN_A})
    hhmm = soon_hhmm("UTC", minutes=120)
    app.put("/v1/users/u1/reminders/rem", json={"category": "meal", "label": "x", "at": hhmm})
    [pending] = list(db[dbm.MESSAGES].find({"reminderId": "rem"}))
    # Two past occurrences, as the consumer would have left them.
    now = utcnow().replace(microsecond=0)
    past = []
    for days, status in ((2, Status.SUCCESS), (1, Status.CANCELLED)):
        doc = {**pending, "_id": f"past-{days}", "scheduledAt": now - dt.timedelta(days=days)}
        doc.update(terminal_update(status, f"because {days}", now), status=status.value)
        past.append(doc)
    past[0].update(sentAt=now, lateness_ms=120)
    db[dbm.MESSAGES].insert_many(past)
    r = app.get("/v1/users/u1/reminders/rem").json()
    assert r["lastOccurrence"]["status"] == "cancelled"
    assert r["lastOccurrence"]["reason"] == "because 1"
    page = app.get("/v1/users/u1/messages?limit=2").json()
    assert [m["id"] for m in page["items"]] == ["past-2", "past-1"]
    assert page["items"][0]["latenessMs"] == 120 and page["items"][0]["deviceId"] == "d1"
    rest = app.get(page["next"]).json()
    assert [m["id"] for m in rest["items"]] == [pending["_id"]] and rest["next"] is None
    only = app.get("/v1/users/u1/messages", params={"status": "success"}).json()["items"]
    assert [m["id"] for m in only] == ["past-2"]
    since = (now - dt.timedelta(hours=30)).isoformat()
    window = app.get("/v1/users/u1/messages", params={"since": since, "until": "2999-01-01"})
    assert [m["id"] for m in window.json()["items"]] == ["past-1", pending["_id"]]
    bad = app.get("/v1/users/u1/messages", params={"since": "yesterday"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["name"] == "since"
    assert "not an ISO 8601 instant" in bad.json()["errors"][0]["message"]
    one = app.get(f"/v1/messages/{pending['_id']}").json()
    assert one["status"] == "pending" and one["reminderId"] == "rem"


# -- erasure ---------------------------------------------------------------------------------
def test_delete_user_erases_and_keeps_anonymised_history(app, api, db):
    _user(app, "gone", tz="UTC", dailyCap=3)
    plan_window(api, db)
    app.put("/v1/users/gone/devices/d1", json={"token": TOKEN_A})
    hhmm = soon_hhmm("UTC", minutes=100)
    app.put("/v1/users/gone/reminders/g1", json={"category": "meal", "label": "x", "at": hhmm})
    [pending] = list(db[dbm.MESSAGES].find({"userId": "gone"}))
    done = {**pending, "_id": "old", "status": "success", "title": "private"}
    db[dbm.MESSAGES].insert_one(done)
    db[dbm.COUNTERS].insert_one({"_id": "gone:2026-01-01", "count": 1})
    assert app.delete("/v1/users/gone").status_code == 204
    assert app.get("/v1/users/gone").status_code == 404
    assert db[dbm.TOKENS].count_documents({"userId": "gone"}) == 0
    assert db[dbm.REMINDERS].count_documents({"userId": "gone"}) == 0
    assert db[dbm.COUNTERS].count_documents({}) == 0
    assert db[dbm.MESSAGES].count_documents({"userId": "gone"}) == 0
    cancelled = db[dbm.MESSAGES].find_one({"_id": pending["_id"]})
    assert cancelled["status"] == "cancelled" and cancelled["reason"] == "user erased"
    kept = db[dbm.MESSAGES].find_one({"_id": "old"})
    assert kept["status"] == "success" and kept["userId"].startswith("erased-")
    assert kept["title"] is None and kept["token"] is None
    shown = app.get("/v1/messages/old").json()  # says it was erased, and when
    assert shown["erasedAt"] is not None and shown["userId"].startswith("erased-"), shown
    assert app.get("/v1/users/gone/messages").json()["items"] == []
    assert app.delete("/v1/users/gone").status_code == 404


# -- operators -------------------------------------------------------------------------------
def test_stats_and_replays_for_ops_keys(app, api, db):
    _user(app, "m1", tz="UTC")
    app.put("/v1/users/m1/devices/d1", json={"token": TOKEN_A})
    app.put("/v1/users/m1/reminders/mr", json={"category": "meal", "label": "x", "at": "03:00"})
    insert_missed(db, "missed-1", "m1", TOKEN_A)
    with api.client("ops") as ops:
        stats = ops.get("/v1/stats").json()
        assert stats["messages"] == {"is_missed": 1} and stats["tokens"]["active"] == 1
        assert ops.get("/v1/stats", params={"since": "2999-01-01"}).json()["messages"] == {}
        dry = ops.post("/v1/replays", json={"dryRun": True, "users": ["m1"]}).json()
        assert dry["selected"] == 1 and dry["counts"] == {}
        assert dry["messages"][0]["id"] == "missed-1"
        assert db[dbm.MESSAGES].find_one({"_id": "missed-1"})["status"] == "is_missed"
        done = ops.post("/v1/replays", json={"users": ["m1"], "reason": "INC-7"})
        assert done.status_code == 202 and done.json()["counts"] == {"queued": 1}, done.text
        consumer_burst(api)  # the consumers send replays, not the API
        again = ops.post("/v1/replays", json={"users": ["m1"]}).json()
        assert again["selected"] == 0
        bad = ops.post("/v1/replays", json={"causes": ["credentials"]})
        assert bad.status_code == 422
        [error] = bad.json()["errors"]  # in the API's terms, not the CLI's flags
        assert error["name"] == "causes" and "--" not in error["message"], error
    m = db[dbm.MESSAGES].find_one({"_id": "missed-1"})
    assert m["status"] == "success" and m["replay"]["by"] == "api:oncall"
    assert [p["to"] for p in api.fake.pushes()] == [TOKEN_A]


# -- batch -----------------------------------------------------------------------------------
def test_batch_applies_each_item_in_order_and_answers_each_on_its_own(app, db):
    items = [
        {"op": "user", "userId": "b1", "user": {"timezone": "Asia/Tashkent"}},
        {"op": "device", "userId": "b1", "deviceId": "bd1", "device": {"token": TOKEN_A}},
        {
            "op": "reminder",
            "userId": "b1",
            "reminderId": "b1-lunch",
            "reminder": {"category": "meal", "label": "lunch", "at": "12:30"},
        },
        {"op": "user", "userId": "b2", "user": {"timezone": "Europe/Berln"}},
        {"op": "device", "userId": "nobody", "deviceId": "x", "device": {"token": TOKEN_A}},
        {"op": "nope"},
    ]
    r = app.post("/v1/batch", json={"items": items})
    assert r.status_code == 200, r.text
    out = r.json()
    assert [x["status"] for x in out["results"]] == [200, 200, 201, 422, 404, 422]
    assert out["succeeded"] == 3 and out["failed"] == 3
    bad = out["results"][3]["problem"]["errors"][0]
    assert bad == {
        "name": "user.timezone",
        "in": "body",
        "message": "unknown time zone 'Europe/Berln'",
    }
    assert db[dbm.REMINDERS].find_one({"_id": "b1-lunch"})["userId"] == "b1"
    again = app.post("/v1/batch", json={"items": items[:3]}).json()
    assert [x["status"] for x in again["results"]] == [200, 200, 200]  # upserts: safe to resend
    too_many = app.post("/v1/batch", json={"items": [items[0]] * 1001})
    assert too_many.status_code == 422 and too_many.json()["errors"][0]["name"] == "items"


def test_a_cursor_past_the_ends_of_time_is_a_422_naming_after(app):
    """Found by an audit of the API against docs/api.md: a cursor whose instant is past year
    9999 (or before year 1) was a 500 (an OverflowError reading it)."""
    import base64
    import json

    _user(app, "u1", tz="UTC")
    for ms in (253402300800000, 2**63, -(2**62), -62135596800001):
        cursor = base64.urlsafe_b64encode(json.dumps([ms, "a"]).encode()).decode().rstrip("=")
        r = app.get(f"/v1/users/u1/messages?after={cursor}")
        assert r.status_code == 422, (ms, r.status_code, r.text)
        assert r.json()["errors"][0]["name"] == "after"
