"""Console sessions across API processes: production runs several ``tzpush api`` tasks behind a
load balancer with no stickiness, so any request of a logged-in operator may reach any of them.

Two real processes on one stack (the same keys, as a deploy gives every task): a login split
between them, pages and actions of a session made on one served by the other, a replay
confirmed on one and watched on the other, a logout on one that ends the session on both.
And a session's key checked at each request: removed, demoted or replaced, it ends the session.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from api.console import session
from api.keys import hash_key, new_key
from shared.settings import ApiKey
from shared.store import db as dbm
from shared.store.mongo.web import MongoSessions
from tests.integration.test_api_support import ApiServer, consumer_burst, prepare, start_api
from tests.integration.test_console_support import (
    csrf_of,
    seed_history,
    seed_world,
    start_console_api,
)

REPLAY_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def pair(stack) -> Iterator[tuple[ApiServer, ApiServer]]:
    """Processes A and B, B configured with A's keys (what every task of a deploy is given)."""
    with start_api(stack.settings) as a:
        keys = [
            {"name": "backend", "scope": "app", "sha256": hash_key(a.app_key)},
            {"name": "oncall", "scope": "ops", "sha256": hash_key(a.ops_key)},
        ]
        with start_console_api(stack.settings, TZPUSH_API__KEYS=json.dumps(keys)) as b:
            yield a, b
            log_b = b.log.read_text(errors="replace")
            assert a.ops_key not in log_b and a.app_key not in log_b


@pytest.fixture
def fresh(db):
    prepare(db)
    return db


def test_a_session_works_on_every_process_and_a_logout_ends_it_on_all(pair, fresh):
    a, b = pair
    seed_world(a, fresh)
    ids = seed_history(fresh)
    missed = ids["missed"]
    # One browser (one cookie jar: cookies are per host, not per port) behind a balancer
    # that sends each request to either process.
    with httpx.Client(timeout=30.0) as browser:
        # A login on A; then every page on B.
        form = browser.get(a.url + "/console/login")
        answer = browser.post(
            a.url + "/console/login",
            data={"key": a.ops_key, "csrf": csrf_of(form.text), "next": "/console/"},
        )
        assert answer.status_code == 303
        on_a = browser.get(a.url + "/console/problems")
        assert on_a.status_code == 200 and missed in on_a.text
        for path in ("/console/", "/console/upcoming", "/console/problems", "/console/users"):
            page = browser.get(b.url + path)
            assert page.status_code == 200, (path, page.status_code, page.headers)
        on_b = browser.get(b.url + "/console/problems")
        assert missed in on_b.text
        token = csrf_of(on_a.text)
        assert csrf_of(on_b.text) == token  # one session, one token, whichever process answers

        # The dry run on B with the page of A, the confirmation on A, the watch page on B.
        body = {"csrf": token, "status": "is_missed", "one": missed}
        dry = browser.post(b.url + "/console/replays/preview", data=body)
        assert dry.status_code == 200, dry.text[:2000]
        assert "<strong>1</strong> is_missed message(s) would be replayed now" in dry.text
        go = browser.post(
            a.url + "/console/replays",
            data={**body, "csrf": csrf_of(dry.text), "expected": "1", "reason": "two tasks"},
        )
        assert go.status_code == 303, go.text[:2000]
        watch = go.headers["location"]
        consumer_burst(a)  # the consumers send replays, not the API
        deadline = time.monotonic() + REPLAY_TIMEOUT_S
        while fresh[dbm.MESSAGES].find_one({"_id": missed})["status"] != "success":
            assert time.monotonic() < deadline, fresh[dbm.MESSAGES].find_one({"_id": missed})
            time.sleep(0.1)
        page = browser.get(b.url + watch, params={"part": "1"})
        assert page.status_code == 200 and 'data-done="yes"' in page.text
        assert f'data-status-of="{missed}"' in page.text
        assert len(a.fake.pushes()) == 1 and b.fake.pushes() == []
        replay = fresh[dbm.MESSAGES].find_one({"_id": missed})["replay"]
        assert replay["by"] == "console:oncall" and replay["reason"] == "two tasks"

        # A logout on A ends the session on B at once, also for a copy of the cookie.
        copied = dict(browser.cookies)
        out = browser.post(a.url + "/console/logout", data={"csrf": token})
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
    with httpx.Client(cookies=copied, timeout=30.0) as thief:
        assert thief.get(b.url + "/console/").status_code == 303
        assert thief.get(a.url + "/console/").status_code == 303
        refused = thief.post(b.url + "/console/replays/preview", data=body)
        assert refused.status_code == 401 and "Your session has ended" in refused.text


def test_a_login_form_from_one_process_is_taken_by_another(pair, fresh):
    a, b = pair
    with httpx.Client(timeout=30.0) as browser:
        # The login form from A, posted to B (the balancer chose so).
        form = browser.get(a.url + "/console/login")
        assert form.status_code == 200
        answer = browser.post(
            b.url + "/console/login",
            data={"key": a.ops_key, "csrf": csrf_of(form.text), "next": "/console/problems"},
        )
        assert answer.status_code == 303, answer.text[:2000]
        assert answer.headers["location"] == "/console/problems"
        assert browser.get(a.url + "/console/problems").status_code == 200
        # A stale form (the first of two) is refused by either process.
        browser.cookies.clear()
        first = browser.get(b.url + "/console/login")
        assert browser.get(a.url + "/console/login").status_code == 200  # its cookie replaces
        stale = browser.post(
            b.url + "/console/login", data={"key": a.ops_key, "csrf": csrf_of(first.text)}
        )
        assert stale.status_code == 403 and "expired" in stale.text


def test_a_removed_or_changed_key_ends_its_sessions(fresh):
    """Each process checks the session's key against its own settings at each request."""
    key, other = new_key(), new_key()

    def sessions(*keys: tuple[str, str, str]) -> session.Sessions:
        configured = [ApiKey(name=n, scope=sc, sha256=SecretStr(hash_key(k))) for n, sc, k in keys]
        return session.Sessions(lambda: MongoSessions(fresh), configured, hours=1)

    a = sessions(("oncall", "ops", key), ("backend", "app", other))
    value, s = a.issue("oncall", key)
    assert a.read(value) == s
    assert sessions(("backend", "app", other)).read(value) is None  # removed
    assert sessions(("oncall", "app", key)).read(value) is None  # no longer ops
    assert sessions(("oncall", "ops", other)).read(value) is None  # another key, same name
    assert sessions(("pager", "ops", key)).read(value) is None  # renamed
    both = sessions(("oncall", "ops", other), ("oncall", "ops", key))  # a rotation under way
    assert both.read(value) == s
