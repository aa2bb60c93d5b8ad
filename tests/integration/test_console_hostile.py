"""The console under attack through a real ``tzpush api``: markup in every field a backend
controls, on every page; forged, altered and replayed cookies; CSRF; ``next=``; read-only mode
(set through ``start_api``'s settings); an app key; odd query parameters; odd user ids."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from shared.clock import utcnow
from shared.domain.messages import Status
from tests.integration.test_api_support import ApiServer, plan_window, prepare, start_api
from tests.integration.test_console_support import csrf_of, ended, login

EVIL = "<script>alert(1)</script>"
UID = 'x"><b>bold<i>'  # a valid user id: printable, no spaces (the API takes no "/" in it)
ODD = "team:alice?x=1#y%41"  # also a valid user id


@pytest.fixture(scope="module")
def read_only_api(stack) -> Iterator[ApiServer]:
    with start_api(stack.settings, console_read_only=True) as server:
        yield server


def _seed(api: ApiServer, db) -> dict[str, str]:
    prepare(db)
    at = (utcnow() + dt.timedelta(minutes=90)).strftime("%H:%M")
    with api.client("app") as app:
        for uid in (UID, ODD):
            assert (
                app.put(f"/v1/users/{quote(uid, safe='')}", json={"timezone": "UTC"}).status_code
                == 200
            )
            r = app.put(
                f"/v1/users/{quote(uid, safe='')}/devices/dev-{len(uid)}",
                json={"token": f"ExponentPushToken[{len(uid)}]"},
            )
            assert r.status_code == 200, r.text
            r = app.put(
                f"/v1/users/{quote(uid, safe='')}/reminders/r-{len(uid)}",
                json={
                    "category": "meal",
                    "label": EVIL,
                    "at": at,
                    "title": EVIL,
                    "body": EVIL,
                    "data": {EVIL: EVIL},
                },
            )
            assert r.status_code == 201, r.text
    plan_window(api, db)
    missed = ended(
        db, UID, EVIL, utcnow() - dt.timedelta(minutes=30), Status.IS_MISSED, reason=EVIL
    )
    return {"missed": missed}


def test_markup_in_every_backend_field_is_shown_as_text_on_every_page(api, db):
    ids = _seed(api, db)
    pages = [
        "/console/",
        "/console/upcoming",
        "/console/problems",
        f"/console/problems?user={quote(UID)}",
        f"/console/users/{quote(UID, safe='')}",
        f"/console/messages/{quote(ids['missed'], safe='')}",
        f"/console/users?id={quote(UID)}",
    ]
    with login(api) as c:
        for page in pages:
            r = c.get(page, follow_redirects=True)
            assert r.status_code == 200, (page, r.status_code, r.text[:500])
            assert "<script>alert" not in r.text and "<b>bold" not in r.text, page
            assert "script-src 'self'" in r.headers["content-security-policy"]


def test_a_user_id_with_a_question_mark_or_a_hash_has_its_page(api, db):
    _seed(api, db)
    with login(api) as c:
        r = c.get("/console/users", params={"id": ODD}, follow_redirects=True)
        assert r.status_code == 200, (r.url, r.status_code)
        assert f"dev-{len(ODD)}" in r.text, "the lookup showed another user's page"


def test_cookies_forged_altered_or_replayed_after_logout_are_refused(api, db):
    prepare(db)
    with login(api) as c:
        cookie = c.cookies.get("tzpush_console")
        assert cookie
        home = c.get("/console/")
        assert home.status_code == 200
        logout = c.post("/console/logout", data={"csrf": csrf_of(home.text)})
        assert logout.status_code == 303
    flipped = cookie[:-1] + ("A" if cookie[-1] != "A" else "B")
    forged = [
        flipped,  # one character altered
        cookie[: len(cookie) // 2],
        cookie + "." + cookie,
        "x" * 5000,
        "",
        cookie,  # replayed after the logout
    ]
    for value in forged:
        with httpx.Client(base_url=api.url, cookies={"tzpush_console": value}) as c:
            assert c.get("/console/").status_code == 303, value[:40]
            r = c.post("/console/replays", data={"csrf": "x", "all": "1"})
            assert r.status_code == 401, value[:40]


def test_actions_need_the_sessions_own_token_and_gets_change_nothing(api, db):
    prepare(db)
    with login(api) as a, login(api) as b:
        token_b = csrf_of(b.get("/console/problems").text)
        for data in ({}, {"csrf": ""}, {"csrf": "nope"}, {"csrf": token_b}):
            r = a.post("/console/replays", data={**data, "all": "1", "reason": "x"})
            assert r.status_code == 403, data
            r = a.post("/console/logout", data=data)
            assert r.status_code == 403, data
        assert a.get("/console/").status_code == 200  # still logged in
        for path in ("/console/replays", "/console/logout", "/console/replays/preview"):
            assert a.get(path).status_code in (404, 405), path


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/",
        "//evil.example/",
        "/\\evil.example/",
        "/console/\\..\\..\\evil",
        "/console//evil.example/",
        "javascript:alert(1)",
        "/console/%0d%0aSet-Cookie:x=1",
    ],
)
def test_next_never_leaves_the_console(api, db, target):
    prepare(db)
    with httpx.Client(base_url=api.url) as c:
        form = c.get("/console/login", params={"next": target})
        r = c.post(
            "/console/login",
            data={"key": api.ops_key, "csrf": csrf_of(form.text), "next": target},
        )
        assert r.status_code == 303
        where = httpx.URL(api.url).join(r.headers["location"])
        assert where.host == "127.0.0.1" and where.path.startswith("/console/"), where
        assert "set-cookie" not in {k.lower() for k in r.headers if k.lower() != "set-cookie"}
        assert "x=1" not in r.headers.get_list("set-cookie")


def test_read_only_refuses_every_action_sent_anyway(read_only_api, db):
    prepare(db)
    with login(read_only_api) as c:
        token = csrf_of(c.get("/console/problems").text)
        for path in ("/console/replays", "/console/replays/preview"):
            r = c.post(path, data={"csrf": token, "all": "1", "reason": "x"})
            assert r.status_code == 403 and "read-only" in r.text, path
            r = c.post(path, data={"all": "1"}, headers={"X-CSRF-Token": token})
            assert r.status_code == 403, path


def test_an_app_key_cannot_log_in(api, db):
    with httpx.Client(base_url=api.url) as c:
        form = c.get("/console/login")
        r = c.post("/console/login", data={"key": api.app_key, "csrf": csrf_of(form.text)})
        assert r.status_code == 403 and "tzpush_console=" not in r.headers.get("set-cookie", "")


@pytest.mark.parametrize(
    "path",
    [
        "/console/?window=" + "x" * 5000,
        "/console/problems?since=99999-99-99T99:99Z&until=%00",
        "/console/problems?user=" + "%ff" * 50,
        "/console/problems?status=failed&status=is_missed&category=%00",
        "/console/problems?since=" + "9" * 190,
        "/console/users/" + "x" * 3000,
        "/console/users?id=%00",
        "/console/messages/" + "%2e%2e/" * 20,
        "/console/replays/" + "x" * 400,
        "/console/health?part=maybe&fresh=2",
        "/console/messages/%ff%fe",
    ],
)
def test_odd_query_parameters_are_refusals_not_errors(api, db, path):
    prepare(db)
    with login(api) as c:
        r = c.get(path)
        assert r.status_code < 500, (path, r.status_code, r.text[:300])


def test_messages_edited_by_hand_leave_the_figures_standing(api, db):
    """A message without status or category, a reason that is a list, a lateness past what an
    integer holds or not a number, a send time that is text: the overview page,
    ``tzpush stats`` and ``GET /v1/stats`` still answer (the single read of the messages made
    each of these a crash: an unhashable reason, an overflow). A date past year 9999 cannot be
    stored on the server here; on MongoDB the read decodes it leniently
    (``shared.store.mongo.figures.LENIENT``)."""
    from ops.stats import compute
    from shared.store import db as dbm
    from tests.integration.ops_helpers import run_cli

    at = utcnow()
    base = {"isDeleted": False, "scheduledAt": at, "userId": "odd", "label": "x"}
    db[dbm.MESSAGES].insert_many(
        [
            {**base, "_id": "h1"},
            {**base, "_id": "h2", "status": "failed", "category": "meal", "reason": ["x"]},
            {**base, "_id": "h3", "status": "success", "category": "meal", "lateness_ms": 1e20},
            {**base, "_id": "h4", "status": "success", "category": ["a"], "lateness_ms": "5"},
            {**base, "_id": "h5", "status": "success", "category": "meal", "lateness_ms": 1e400},
            {**base, "_id": "h6", "status": "pending", "category": "meal", "sentAt": "soon"},
        ]
    )
    data = compute(db, None)
    assert data["messages"]["None"] == 1 and data["messages"]["failed"] >= 1
    assert {"reason": "['x']", "count": 1} in data["reasons"]["failed"]
    assert run_cli(api.settings, "stats") == 0
    assert run_cli(api.settings, "stats", "--json") == 0
    with login(api) as c:
        r = c.get("/console/", params={"window": "all"}, follow_redirects=True)
        assert r.status_code == 200, r.text[:500]
    with api.client("ops") as ops:
        r = ops.get("/v1/stats")
    assert r.status_code == 200, r.text[:500]
