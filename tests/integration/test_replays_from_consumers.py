"""Replays send from where sends happen (issue 32 item 3): the API, defined without the Expo
access token as on ECS, selects and takes what to replay and queues it; a consumer, which has
the token, sends it under its guard, its intent check and the fleet's rate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.store import db as dbm
from tests.integration.test_api_support import (
    ApiServer,
    consumer_burst,
    insert_missed,
    prepare,
    start_api,
)

EXPO_TOKEN = "expo-access-token-of-the-consumers"
TOKEN_A = "ExponentPushToken[replay-device-a]"


@pytest.fixture(scope="module")
def api(stack) -> Iterator[ApiServer]:
    with start_api(stack.settings, expo_token=EXPO_TOKEN) as server:
        yield server


@pytest.fixture
def ops(api, db):
    prepare(db)
    api.fake.clear()
    with api.client("ops") as c:
        yield c


def _missed_message(api: ApiServer, db, uid: str = "r1") -> str:
    with api.client("app") as app:
        assert app.put(f"/v1/users/{uid}", json={"timezone": "UTC"}).status_code == 200
        assert app.put(f"/v1/users/{uid}/devices/d1", json={"token": TOKEN_A}).status_code == 200
        body = {"category": "meal", "label": "x", "at": "03:00"}
        assert app.put(f"/v1/users/{uid}/reminders/mr", json=body).status_code == 201
    mid = f"missed-{uid}"
    insert_missed(db, mid, uid, TOKEN_A)
    return mid


def _consumer_burst(api: ApiServer) -> str:
    """A consumer with the Expo access token drains what is queued, then exits."""
    return consumer_burst(api, TZPUSH_EXPO__ACCESS_TOKEN=EXPO_TOKEN)


def test_a_replay_through_the_api_is_sent_once_by_a_consumer_with_the_expo_token(api, ops, db):
    mid = _missed_message(api, db)
    r = ops.post("/v1/replays", json={"users": ["r1"], "reason": "INC-32"})
    assert r.status_code == 202, r.text
    assert r.json()["selected"] == 1 and r.json()["counts"] == {"queued": 1}, r.json()
    held = db[dbm.MESSAGES].find_one({"_id": mid})
    assert held["status"] == "replaying" and held["replay"]["by"] == "api:oncall"
    assert api.fake.pushes() == []  # the API process sent nothing
    _consumer_burst(api)
    m = db[dbm.MESSAGES].find_one({"_id": mid})
    assert m["status"] == "success", m
    assert m["replay"]["by"] == "api:oncall" and m["replay"]["reason"] == "INC-32"
    assert [p["to"] for p in api.fake.pushes()] == [TOKEN_A]
    with api.client("app") as app:
        shown = app.get(f"/v1/messages/{mid}")
    assert shown.status_code == 200 and shown.json()["status"] == "success", shown.text
    again = ops.post("/v1/replays", json={"users": ["r1"]})
    assert again.json()["selected"] == 0
    _consumer_burst(api)
    assert [p["to"] for p in api.fake.pushes()] == [TOKEN_A]  # exactly once
