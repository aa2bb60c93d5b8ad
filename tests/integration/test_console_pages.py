"""The console's Users list, the Problems page's reasons and the favicon, over plain HTTP
(httpx) against a real `tzpush api`."""

from __future__ import annotations

import html
import re
from urllib.parse import quote

import httpx
import pytest

from tests.integration.test_api_support import prepare
from tests.integration.test_console_support import login, seed_history, seed_world

ROW = re.compile(r'<tr data-user="([^"]*)">')
NEXT = re.compile(r'<a [^>]*rel="next"[^>]*href="([^"]+)"|<a [^>]*href="([^"]+)"[^>]*rel="next"')


@pytest.fixture
def fresh(db):
    prepare(db)
    return db


def _listed(text: str) -> list[str]:
    return [html.unescape(u) for u in ROW.findall(text)]


def _next(text: str) -> str | None:
    found = NEXT.search(text)
    return html.unescape(found.group(1) or found.group(2)) if found else None


def _put_users(api, ids):
    with api.client("app") as app:
        for uid in ids:
            r = app.put(f"/v1/users/{quote(uid, safe='')}", json={"timezone": "UTC"})
            assert r.status_code == 200, r.text


def test_the_users_page_lists_every_user_a_page_at_a_time_each_linked_to_their_page(api, fresh):
    users = ["al", "alice", "alina", "bob", "chen", "x%41y", "zed?#"]
    _put_users(api, users)
    with login(api) as c:
        first = c.get("/console/users")
        assert first.status_code == 200
        assert _listed(first.text) == sorted(users)
        for uid in users:
            assert f'href="/console/users/{html.escape(quote(uid, safe=""))}"' in first.text
        assert 'href="/console/users" aria-current="page"' in first.text  # the navigation's
        seen: list[str] = []
        link: str | None = "/console/users?limit=2"
        pages = 0
        while link:
            page = c.get(link)
            assert page.status_code == 200, (link, page.text[:500])
            rows = _listed(page.text)
            assert 1 <= len(rows) <= 2
            seen += rows
            link = _next(page.text)
            pages += 1
        assert seen == sorted(users) and pages == 4  # none repeated, none skipped


def test_the_users_page_searches_by_id_prefix_and_pages_the_matches(api, fresh):
    _put_users(api, ["al", "alice", "alina", "albert", "bob", "x%41y", "x%41z", "xAy"])
    with login(api) as c:
        found = c.get("/console/users", params={"q": "al"})
        assert found.status_code == 200
        assert _listed(found.text) == ["al", "albert", "alice", "alina"]
        assert 'value="al"' in found.text  # the search box keeps what was searched
        assert _listed(c.get("/console/users", params={"q": "x%41"}).text) == ["x%41y", "x%41z"]
        assert "No user" in c.get("/console/users", params={"q": "nobody"}).text
        for odd in ("\U0010ffff", "a\x00", "<b>", "%", "."):  # read as text, never as a pattern
            got = c.get("/console/users", params={"q": odd})
            assert got.status_code == 200 and _listed(got.text) == [], (odd, got.text[:300])
        page = c.get("/console/users", params={"q": "al", "limit": 3})
        assert _listed(page.text) == ["al", "albert", "alice"]
        rest = c.get(_next(page.text))
        assert _listed(rest.text) == ["alina"] and _next(rest.text) is None


def test_the_users_page_refuses_a_cursor_it_never_gave_out_and_a_bad_limit(api, fresh):
    with login(api) as c:
        forged = c.get("/console/users", params={"after": "not-a-cursor"})
        assert forged.status_code == 422 and "after" in forged.text
        assert forged.headers["content-type"].startswith("text/html")
        assert c.get("/console/users", params={"limit": 0}).status_code == 422
        assert c.get("/console/users", params={"limit": 201}).status_code == 422
        # The lookup by exact id still goes to the user's page.
        exact = c.get("/console/users", params={"id": "alice"})
        assert exact.status_code == 303 and exact.headers["location"] == "/console/users/alice"


def test_problems_by_reason_shows_only_the_chosen_status(api, fresh):
    seed_world(api, fresh)
    seed_history(fresh)
    with login(api) as c:
        for status, other in (("is_missed", "failed"), ("failed", "is_missed")):
            page = c.get("/console/problems", params={"status": status})
            assert page.status_code == 200
            table = re.search(r'<table id="reasons"[^>]*>(.*?)</table>', page.text, re.S)
            assert table, page.text[:3000]
            reasons = table.group(1)
            assert f"st-{status}" in reasons, (status, reasons)
            assert f"st-{other}" not in reasons, (status, reasons)


def test_every_page_names_a_favicon_served_with_the_static_files(api, fresh):
    login_form = httpx.get(api.url + "/console/login", timeout=30)
    assert '<link rel="icon" href="/console/static/favicon.svg"' in login_form.text
    with login(api) as c:
        for path in ("/console/", "/console/users", "/console/problems", "/console/upcoming"):
            page = c.get(path)
            icon = re.search(r'<link rel="icon" href="([^"]+)"', page.text)
            assert icon, (path, page.text[:600])
            got = c.get(icon.group(1))
            assert got.status_code == 200 and got.headers["content-type"].startswith("image/")
