"""Every list's ``next`` link gives the next page when followed as it stands, whatever the user
id holds (``%41``, ``%2F``, ``:``): the link keeps the path as the request spelled it."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from shared.domain.messages import Status
from tests.integration.test_api_support import plan_window, prepare, soon_hhmm

ODD_IDS = ["team:x%41y", "a%2Fb", "plain"]


@pytest.fixture
def app(api, db):
    prepare(db)
    with api.client("app") as c:
        yield c


def _walk(app, url: str) -> list[dict]:
    items: list[dict] = []
    pages = 0
    while url:
        answer = app.get(url)
        assert answer.status_code == 200, (url, answer.text)
        items += answer.json()["items"]
        url = answer.json()["next"]
        pages += 1
        assert pages < 20, "the next links go round in a circle"
    return items


@pytest.mark.parametrize("uid", ODD_IDS)
def test_following_next_walks_every_list_of_an_odd_user_id(app, api, db, uid):
    path = "/v1/users/" + quote(uid, safe="")
    assert app.put(path, json={"timezone": "Asia/Tashkent"}).status_code == 200
    hhmm = soon_hhmm("Asia/Tashkent")
    for i in range(3):
        body = {"category": "meal", "label": f"l{i}", "at": hhmm}
        assert app.put(f"{path}/reminders/r{i}", json=body).status_code in (200, 201)
        token = f"ExponentPushToken[pages-{i}]"
        assert app.put(f"{path}/devices/d{i}", json={"token": token}).status_code == 200
    plan_window(api, db)

    reminders = _walk(app, f"{path}/reminders?limit=1")
    assert sorted(r["id"] for r in reminders) == ["r0", "r1", "r2"]
    devices = _walk(app, f"{path}/devices?limit=1")
    assert sorted(d["deviceId"] for d in devices) == ["d0", "d1", "d2"]
    messages = _walk(app, f"{path}/messages?limit=2&status={Status.PENDING.value}")
    assert len(messages) == 9 and {m["userId"] for m in messages} == {uid}


def test_a_hand_made_cursor_of_this_list_is_a_position_and_garbage_a_422(app):
    from api import pages

    assert app.put("/v1/users/u1", json={"timezone": "Asia/Tashkent"}).status_code == 200
    for rid in ("a", "b", "c"):
        body = {"category": "meal", "label": rid, "at": "12:30"}
        assert app.put(f"/v1/users/u1/reminders/{rid}", json=body).status_code in (200, 201)
    made = pages.encode("reminders", ["a"])  # never given out: a position, as docs/api.md says
    answer = app.get(f"/v1/users/u1/reminders?after={made}")
    assert answer.status_code == 200 and [r["id"] for r in answer.json()["items"]] == ["b", "c"]
    for bad in ("garbage", pages.encode("devices", ["a"]), pages.encode("reminders", [1])):
        assert app.get(f"/v1/users/u1/reminders?after={bad}").status_code == 422
