"""Behind a load balancer the console's session cookie is ``Secure``: the API trusts
``X-Forwarded-Proto`` (and ``-For``) from the addresses in ``TZPUSH_API__TRUSTED_PROXIES``, and
from nobody else. Requests come from 127.0.0.2 here: an address that is not the API's own
loopback default, as a load balancer's is not."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.integration.test_api_support import ApiServer, start_api
from tests.integration.test_console_support import csrf_of

PROXY = "127.0.0.2"


def _login_cookie(server: ApiServer) -> str:
    transport = httpx.HTTPTransport(local_address=PROXY)
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}
    with httpx.Client(base_url=server.url, transport=transport, headers=headers) as c:
        form = c.get("/console/login")
        assert form.status_code == 200, form.text
        # A Secure cookie is not sent back over this test's plain HTTP (the browser speaks HTTPS
        # to the load balancer): hand the form's cookie back as the browser would.
        c.cookies.clear()
        pre = form.headers.get("set-cookie", "").split(";", 1)[0]
        answer = c.post(
            "/console/login",
            data={"key": server.ops_key, "csrf": csrf_of(form.text), "next": "/console/"},
            headers={"Cookie": pre} if pre else {},
        )
        assert answer.status_code == 303, answer.text
        return answer.headers["set-cookie"]


@pytest.fixture(scope="module")
def behind_proxy(stack) -> Iterator[ApiServer]:
    with start_api(stack.settings, env={"TZPUSH_API__TRUSTED_PROXIES": PROXY}) as server:
        yield server


def test_the_session_cookie_is_secure_behind_a_trusted_proxy(behind_proxy) -> None:
    assert "secure" in _login_cookie(behind_proxy).lower()


def test_forwarded_headers_from_an_untrusted_address_are_ignored(api) -> None:
    cookie = _login_cookie(api)  # the default trusts only 127.0.0.1
    assert "secure" not in cookie.lower()
