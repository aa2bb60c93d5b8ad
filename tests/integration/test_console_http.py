"""The console over plain HTTP (httpx, no browser) against a real `tzpush api`: the login and
its cookie, CSRF on every action, sessions that end, read-only mode refused by the server,
errors as pages, the security headers, and the pages' figures against the API's own."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from api.console import session
from api.keys import hash_key
from shared.settings import ApiKey
from shared.store import db as dbm
from shared.store.mongo.web import MongoSessions
from tests.integration.test_api_support import ApiServer, prepare
from tests.integration.test_console_support import (
    csrf_of,
    login,
    seed_history,
    seed_world,
    start_console_api,
)


@pytest.fixture(scope="module")
def read_only_api(stack) -> Iterator[ApiServer]:
    with start_console_api(stack.settings, TZPUSH_API__CONSOLE_READ_ONLY="true") as server:
        yield server


@pytest.fixture
def fresh(db):
    prepare(db)
    return db


def _cookie_header(answer: httpx.Response, name: str) -> str:
    for value in answer.headers.get_list("set-cookie"):
        if value.startswith(name + "="):
            return value
    raise AssertionError(f"no {name} cookie set: {answer.headers.get_list('set-cookie')}")


def test_login_sets_a_strict_httponly_session_and_refuses_wrong_keys(api, fresh):
    with httpx.Client(base_url=api.url, timeout=30) as c:
        page = c.get("/console/")
        assert page.status_code == 303
        assert page.headers["location"] == "/console/login?next=%2Fconsole%2F"
        form = c.get("/console/login", params={"next": "/console/upcoming"})
        assert form.status_code == 200 and 'type="password"' in form.text
        login_cookie = _cookie_header(form, "tzpush_console_login").lower()
        assert "httponly" in login_cookie and "samesite=strict" in login_cookie
        tokens = [csrf_of(form.text)]

        def attempt(key: str, csrf: str | None = None) -> httpx.Response:
            answer = c.post(
                "/console/login",
                data={
                    "key": key,
                    "csrf": tokens[-1] if csrf is None else csrf,
                    "next": "/console/upcoming",
                },
            )
            if answer.status_code != 303:  # each form answered carries a fresh token
                tokens.append(csrf_of(answer.text))
            return answer

        wrong = attempt("tzp_not-a-key-at-all")
        assert wrong.status_code == 401 and "That key is not known here" in wrong.text
        app_key = attempt(api.app_key)
        assert app_key.status_code == 403
        assert "The key &#39;backend&#39; has scope app" in app_key.text
        assert "tzpush_console=" not in " ".join(app_key.headers.get_list("set-cookie"))
        no_csrf = attempt(api.ops_key, csrf="")
        assert no_csrf.status_code == 403 and "expired" in no_csrf.text
        stale = attempt(api.ops_key, csrf=tokens[0])  # an earlier form's token
        assert stale.status_code == 403
        c.cookies.clear()  # a login form posted without its cookie (another site's form)
        assert attempt(api.ops_key).status_code == 403

        form = c.get("/console/login", params={"next": "/console/upcoming"})
        ok = attempt(api.ops_key, csrf=csrf_of(form.text))
        assert ok.status_code == 303 and ok.headers["location"] == "/console/upcoming"
        session = _cookie_header(ok, "tzpush_console").lower()
        for part in ("httponly", "samesite=strict", "path=/console", "max-age=43200"):
            assert part in session, session
        assert "secure" not in session  # plain http here; https gets Secure
        assert api.ops_key not in ok.headers.get("set-cookie", "")
        assert c.get("/console/upcoming").status_code == 200
        # An outside "next" is not followed.
        assert (
            c.get("/console/login", params={"next": "https://evil.example/"}).headers["location"]
            == "/console/"
        )


def test_every_action_needs_the_sessions_csrf_token(api, fresh):
    with login(api) as c:
        page = c.get("/console/problems")
        assert page.status_code == 200
        token = csrf_of(page.text)
        body = {"status": "is_missed", "scope": "all"}
        missing = c.post("/console/replays/preview", data=body)
        assert missing.status_code == 403 and "security token is missing or wrong" in missing.text
        wrong = c.post("/console/replays/preview", data={**body, "csrf": token[:-2] + "xx"})
        assert wrong.status_code == 403
        assert c.post("/console/replays", data={**body, "expected": "5"}).status_code == 403
        assert c.post("/console/logout").status_code == 403
        by_header = c.post("/console/replays/preview", data=body, headers={"X-CSRF-Token": token})
        assert by_header.status_code == 200 and "Nothing to replay" in by_header.text
        # A token of another session is refused too.
        with login(api) as other:
            theirs = csrf_of(other.get("/console/problems").text)
        assert theirs != token
        assert c.post("/console/replays/preview", data={**body, "csrf": theirs}).status_code == 403
        # Logging out ends the session for whoever holds a copy of the cookie.
        copied = dict(c.cookies)
        out = c.post("/console/logout", data={"csrf": token})
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
    with httpx.Client(base_url=api.url, cookies=copied, timeout=30) as thief:
        assert thief.get("/console/").status_code == 303


def test_a_session_is_a_random_id_kept_in_the_database_and_ends(api, fresh):
    with login(api) as c:
        cookie = c.cookies["tzpush_console"]
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", cookie)  # 256 random bits, nothing else
        (doc,) = fresh[dbm.CONSOLE_SESSIONS].find()
        assert doc["keyName"] == "oncall" and doc["_id"] != cookie  # the id's digest only
        assert cookie not in repr(doc) and api.ops_key not in repr(doc)
        assert doc["csrf"] == csrf_of(c.get("/console/").text)
        altered = cookie[:-1] + ("A" if cookie[-1] != "A" else "B")
        with httpx.Client(base_url=api.url, timeout=30) as other:
            for value in (altered, doc["_id"], cookie + "x"):
                other.cookies.set("tzpush_console", value, path="/console")
                assert other.get("/console/").status_code == 303, value
    now = [float(int(time.time()))]
    key = api.ops_key
    keys = [ApiKey(name="oncall", scope="ops", sha256=SecretStr(hash_key(key)))]
    sessions = session.Sessions(lambda: MongoSessions(fresh), keys, hours=0.5, clock=lambda: now[0])
    value, s = sessions.issue("oncall", key)
    assert sessions.read(value) == s and s.name == "oncall"
    now[0] += 1799
    assert sessions.read(value) is not None
    now[0] += 2
    assert sessions.read(value) is None  # after console_session_hours
    value, s = sessions.issue("oncall", key)
    sessions.end(s)
    assert sessions.read(value) is None
    assert fresh[dbm.CONSOLE_SESSIONS].find_one({"_id": s.sid}) is None  # deleted at logout
    nonce = sessions.login_nonce()
    assert sessions.login_ok(nonce, sessions.login_token(nonce))
    assert not sessions.login_ok(nonce, sessions.login_token(nonce + "x"))
    assert not sessions.login_ok(nonce, "é" + nonce[1:])  # any text: refused, not a crash
    now[0] += 3601
    assert not sessions.login_ok(nonce, sessions.login_token(nonce))  # a stale form


def test_read_only_mode_hides_actions_and_the_server_refuses_them(read_only_api, fresh):
    seed_world(read_only_api, fresh)
    ids = seed_history(fresh)
    with login(read_only_api) as c:
        page = c.get("/console/problems")
        assert page.status_code == 200 and ids["missed"] in page.text
        assert "read-only" in page.text
        assert "/console/replays" not in page.text and 'name="ids"' not in page.text
        message = c.get(f"/console/messages/{ids['missed']}")
        assert message.status_code == 200 and "Replay this message" not in message.text
        token = csrf_of(page.text)  # the logout form's
        for path in ("/console/replays/preview", "/console/replays"):
            refused = c.post(
                path, data={"csrf": token, "status": "is_missed", "one": ids["missed"]}
            )
            assert refused.status_code == 403 and "read-only" in refused.text
        assert fresh[dbm.MESSAGES].find_one({"_id": ids["missed"]})["status"] == "is_missed"
        assert c.post("/console/logout", data={"csrf": token}).status_code == 303
    assert read_only_api.fake.pushes() == []


def test_errors_are_pages_and_headers_keep_the_console_to_itself(api, fresh):
    with login(api) as c:
        missing = c.get("/console/messages/no-such-message")
        assert missing.status_code == 404 and "no message &#39;no-such-message&#39;" in missing.text
        assert missing.headers["content-type"].startswith("text/html")
        bad = c.get("/console/problems", params={"since": "yesterday", "category": "snacks"})
        assert bad.status_code == 422
        assert "since &#39;yesterday&#39;" in bad.text and "unknown category" in bad.text
        assert 'aria-invalid="true"' in bad.text
        assert c.get("/console/", params={"window": "3y"}).status_code == 422
        assert c.get("/console/users/no one").status_code == 422
        assert c.get("/console/users/nobody").status_code == 404
        page = c.get("/console/")
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert page.headers["cache-control"] == "no-store"
        assert page.headers["referrer-policy"] == "no-referrer"
        assert '<script src="/console/static/console.js"' in page.text
        assert not re.search(
            r'(src|href|action)="(https?:)?//', page.text
        )  # nothing fetched from elsewhere
        static = c.get("/console/static/console.js")
        assert static.status_code == 200 and "data-refresh" in static.text
    schema = httpx.get(api.url + "/openapi.json", timeout=30).json()
    assert not [p for p in schema["paths"] if p.startswith("/console")]


def test_overview_counts_match_v1_stats_for_each_window(api, fresh):
    seed_world(api, fresh)
    seed_history(fresh)
    with login(api) as c, api.client("ops") as ops:
        for window, since in (("all", None), ("1h", "1h")):
            page = c.get("/console/", params={"window": window})
            assert page.status_code == 200
            params = {}
            if since:
                start = re.search(r'\(since <time datetime="([^"]+)"', page.text)
                assert start, page.text[:3000]
                params["since"] = start.group(1)
            stats = ops.get("/v1/stats", params=params).json()
            cells = {
                (cat, status): int(n)
                for cat, status, n in re.findall(
                    r'data-category="([^"]+)" data-status="([^"]+)">(\d+)<', page.text
                )
            }
            expected = {
                (cat, status): stats["by_category"][cat].get(status, 0)
                for cat in stats["by_category"]
                for status in stats["messages"]
            }
            assert cells == expected, (window, cells, expected)
            p50 = re.search(r'data-figure="p50">([^<]+)<', page.text).group(1)
            assert p50 == f"{stats['lateness_ms']['p50']:,} ms"
        assert 'data-no-consumer="meal"' in page.text  # no consumer runs here


def test_the_demo_prints_the_console_url_and_a_key_that_logs_in(api, fresh):
    """`make run` (ops/demo_api.py) prints where the console is and the key to log in with."""
    import io
    import subprocess

    from rich.console import Console

    from ops.demo_api import DemoApi, show_api

    stand_in = subprocess.Popen(["sleep", "60"])  # the demo's API process, alive meanwhile
    try:
        out = io.StringIO()
        demo = DemoApi(api.url, api.ops_key, stand_in, log_path=api.log)
        show_api(demo, Console(file=out, width=100), "u00")
    finally:
        stand_in.kill()
        stand_in.wait()
    printed = out.getvalue()
    found = re.search(r"Operator console: (\S+) \(log in with the same key: (\S+)\)", printed)
    assert found, printed
    assert found.group(1) == api.url + "/console/" and found.group(2) == api.ops_key
    with httpx.Client(base_url=api.url, timeout=30) as c:
        form = c.get(found.group(1), follow_redirects=True)
        answer = c.post("/console/login", data={"key": found.group(2), "csrf": csrf_of(form.text)})
        assert answer.status_code == 303 and c.get("/console/").status_code == 200


def test_what_users_wrote_is_shown_as_text_never_as_markup(api, fresh):
    label = "<script>alert('x')</script>"
    with api.client("app") as app:
        assert app.put("/v1/users/mallory", json={"timezone": "UTC"}).status_code == 200
        app.put("/v1/users/mallory/devices/d1", json={"token": "ExponentPushToken[m-allory]"})
        r = app.put(
            "/v1/users/mallory/reminders/m-1",
            json={"category": "meal", "label": label, "at": "03:00", "title": '"><b>t'},
        )
        assert r.status_code in (200, 201), r.text
    with login(api) as c:
        page = c.get("/console/users/mallory")
        assert page.status_code == 200
        assert (
            label not in page.text
            and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page.text
        )
