"""Management writes racing through a real ``tzpush api``, as a backend sends them: concurrent
PATCHes of one reminder, and a batch whose login takes an install before its old user's zone
change. After each, exactly the current versions' occurrences are pending, once each, and only
for active registrations."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from shared.store import db as dbm
from tests.integration.test_api_support import plan_window, prepare, soon_hhmm

Doc = dict[str, Any]
ZONE = "Asia/Tashkent"
TOKEN = "ExponentPushToken[write-races]"
ROUNDS = 20
PATCHES = 6


@pytest.fixture
def app(api, db):
    prepare(db)
    with api.client("app") as c:
        yield c


def _user(app, uid: str, tz: str = ZONE) -> None:
    r = app.put(f"/v1/users/{uid}", json={"timezone": tz})
    assert r.status_code == 200, r.text


def _pending(db, **flt: Any) -> list[Doc]:
    return list(db[dbm.MESSAGES].find({"status": "pending", "isDeleted": False, **flt}))


def _round_problem(db, rid: str) -> str | None:
    """What is wrong with the pending messages of ``rid`` (None: exactly its final version's
    one occurrence of the next 24 h, once)."""
    final = db[dbm.REMINDERS].find_one({"_id": rid})
    pending = _pending(db, reminderId=rid)
    versions = sorted(m["reminderVersion"] for m in pending)
    if versions != [final["version"]]:
        return f"{rid}: final version {final['version']} ({final['time']}), pending {versions}"
    return None


def test_six_concurrent_patches_of_a_reminder_leave_exactly_its_final_version_pending(api, app, db):
    """In each of 20 rounds, six PATCHes of one reminder at once, alternating between two times
    of day (each a new version): all answer 200, and then exactly the final stored version's
    occurrence is pending, once, and nothing of an older version."""
    _user(app, "racer")
    plan_window(api, db)
    assert app.put("/v1/users/racer/devices/phone", json={"token": TOKEN}).status_code == 200
    times = [soon_hhmm(ZONE, 90), soon_hhmm(ZONE, 120)]
    problems = []
    with ThreadPoolExecutor(PATCHES) as pool:
        for n in range(ROUNDS):
            rid = f"race-{n}"
            body = {"category": "meal", "label": f"lunch-{n}", "at": times[0]}
            r = app.put(f"/v1/users/racer/reminders/{rid}", json=body)
            assert r.status_code == 201, r.text
            start = threading.Barrier(PATCHES)

            def patch(k: int, rid: str = rid, start: threading.Barrier = start) -> int:
                change = {"at": times[k % 2], "title": f"take {k}"}
                with api.client("app") as c:
                    start.wait(timeout=30)
                    return c.patch(f"/v1/users/racer/reminders/{rid}", json=change).status_code

            codes = list(pool.map(patch, range(PATCHES)))
            assert codes == [200] * PATCHES, codes
            if (problem := _round_problem(db, rid)) is not None:
                problems.append(problem)
    assert problems == [], f"{len(problems)} of {ROUNDS} rounds: {problems}"


def test_a_batch_login_taking_an_install_then_a_zone_change_of_its_old_user_plans_nothing_for_it(
    api, app, db
):
    """[B logs in on A's install, A changes time zone] in one batch plans nothing for A's
    registration that B's login deactivated, as the two requests one after the other do."""
    _user(app, "a")
    _user(app, "b")
    plan_window(api, db)
    assert app.put("/v1/users/a/devices/phone", json={"token": TOKEN}).status_code == 200
    body = {"category": "meal", "label": "lunch", "at": soon_hhmm(ZONE)}
    assert app.put("/v1/users/a/reminders/a-lunch", json=body).status_code == 201
    assert len(_pending(db, userId="a")) == 1
    items = [
        {"op": "device", "userId": "b", "deviceId": "phone", "device": {"token": TOKEN}},
        {"op": "user", "userId": "a", "user": {"timezone": "Europe/Berlin"}},
    ]
    r = app.post("/v1/batch", json={"items": items})
    assert r.status_code == 200, r.text
    assert [x["status"] for x in r.json()["results"]] == [200, 200], r.text
    inactive = {t["_id"] for t in db[dbm.TOKENS].find({"isActive": False})}
    assert inactive, "B's login deactivated A's registration"
    stray = _pending(db, notificationTokenId={"$in": sorted(inactive)})
    assert stray == [], stray
    assert Counter(m["userId"] for m in _pending(db)) == Counter()  # B has no reminders
