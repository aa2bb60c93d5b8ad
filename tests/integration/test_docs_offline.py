"""The API's documentation page (/docs) in Debian's Chromium with no network but the API's own
origin: it renders from assets the installed package serves, under a Content-Security-Policy that
allows only this origin's scripts (a script from elsewhere could read the console's CSRF token on
the same origin and start replays)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.integration.test_console_support import chromium

TIMEOUT_MS = 20_000
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium(), headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def _offline_page(browser: Any, origin: str) -> tuple[Any, list[str], list[str]]:
    """A page whose every request to another origin is refused; returns it with the lists of
    refused URLs and of the console's error messages (CSP violations among them)."""
    context = browser.new_context(viewport={"width": 1200, "height": 820})
    refused: list[str] = []
    errors: list[str] = []
    host = urlsplit(origin).netloc

    def only_own_origin(route: Any) -> None:
        if urlsplit(route.request.url).netloc == host or route.request.url.startswith(
            ("data:", "blob:")
        ):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    context.route("**/*", only_own_origin)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return page, refused, errors


def test_the_swagger_page_renders_every_route_with_no_network_and_no_inline_script(
    api, browser
) -> None:
    page, refused, errors = _offline_page(browser, api.url)
    page.goto(api.url + "/docs")
    page.locator(".opblock").first.wait_for()
    assert page.locator(".opblock").count() >= 10
    assert page.locator('[data-path="/v1/users/{userId}/reminders"]').first.is_visible()
    page.screenshot(path=str(SHOTS / "docs-offline.png"))
    assert refused == [], f"the docs page asked another origin for {refused}"
    assert not [e for e in errors if "Content Security Policy" in e], errors
    page.context.close()


def test_the_docs_page_forbids_scripts_from_elsewhere_and_inline(api) -> None:
    answer = httpx.get(api.url + "/docs", timeout=10)
    assert answer.status_code == 200, answer.text
    policy = answer.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy, policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1].split(";", 1)[0]
    assert "frame-ancestors 'none'" in policy
    assert "cdn" not in answer.text.lower(), answer.text
    assert "<script>" not in answer.text, "an inline script needs 'unsafe-inline'"
