"""The console in a real browser: Playwright driving Debian's Chromium (headless) against a real
`tzpush api` on the test stack, with a real consumer running.

- every page at a desktop size and at 360 px (no sideways scroll of the page; at 360 px chart
  labels readable and every table's last column on screen or in its scroll box), no request
  failing and no script error, the overview's counts equal to ``GET /v1/stats``, and a
  screenshot of each page made on the way: into docs/console/ with
  ``TZPUSH_UPDATE_SCREENSHOTS=1``, else into a temporary directory;
- a missed message replayed from the Problems page (a dry run, then a confirmation) reaches
  the Expo fake exactly once, and the page shows it ``success``;
- a wrong key, an app key and a form without its CSRF token are refused;
- read-only mode hides the actions, and the server refuses them when they are sent anyway.

Chromium comes from apt (`make install`); Playwright's own browser download is never used.
Without /usr/bin/chromium these tests fail, saying so.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.clock import utcnow
from shared.store import db as dbm
from shared.store import fleet
from tests.integration.consumer_support import TZPUSH, consumer_env
from tests.integration.harness import wait_for
from tests.integration.test_api_support import ApiServer, consumer_burst, prepare
from tests.integration.test_console_support import (
    USERS,
    chromium,
    seed_history,
    seed_world,
    start_console_api,
    token_of,
)

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "docs" / "console"
UPDATE_SHOTS = "TZPUSH_UPDATE_SCREENSHOTS"
DESKTOP = {"width": 1200, "height": 820}
PHONE = {"width": 360, "height": 740}
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def fresh(api, db):
    prepare(db)
    api.fake.clear()
    return db


@pytest.fixture(scope="module")
def consumer(api, mongo_client) -> Iterator[subprocess.Popen[bytes]]:
    """A real `tzpush consumer` on the API's queues and Expo fake, for three categories only
    (the overview then shows the other three without a consumer)."""
    log = Path(tempfile.mkstemp(prefix="tzpush-console-consumer-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(TZPUSH), "consumer", "--categories", "meal,mood,medication"],
            cwd=REPO,
            env=consumer_env(api.settings),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    database = mongo_client[api.settings.mongo.database]

    def live() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the consumer exited {proc.returncode}: {_read(log)}")
        now = dt.datetime.now(dt.UTC)
        return any(s.get("kind") == "consumer" for s in fleet.live_senders(database, now))

    try:
        wait_for(live, 30, what="the consumer to register as a live sender")
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.unlink(missing_ok=True)


def _read(path: Path) -> str:
    return Path(path).read_text(errors="replace")[-3000:]


def _page(browser: Any, viewport: dict[str, int]) -> Any:
    context = browser.new_context(viewport=viewport, device_scale_factor=1)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return page


def _log_in(page: Any, server: ApiServer, key: str) -> None:
    page.goto(server.url + "/console/login")
    page.get_by_label("Ops key").fill(key)
    _go(page, page.get_by_role("button", name="Log in"))


def _go(page: Any, target: Any) -> None:
    """Click what leads to another page, and wait until that page has loaded."""
    with page.expect_navigation():
        target.click()


_shots: dict[str, Path] = {}


@pytest.fixture(scope="module", autouse=True)
def shots_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: docs/console/ when ``TZPUSH_UPDATE_SCREENSHOTS=1``
    (refreshing the committed ones), else pytest's temporary directory, so that a test run
    leaves the tree as it was."""
    if os.environ.get(UPDATE_SHOTS) == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        _shots["dir"] = SHOTS
    else:
        _shots["dir"] = tmp_path_factory.mktemp("console-screenshots")
    return _shots["dir"]


def _shot(page: Any, name: str) -> None:
    """A small PNG (the viewport, a 64-colour palette) in ``shots_dir``'s directory."""
    from PIL import Image

    path = _shots["dir"] / f"{name}.png"
    page.wait_for_load_state("load")
    page.screenshot(path=str(path), animations="disabled")
    with Image.open(path) as img:
        small = img.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def _no_sideways_scroll(page: Any, what: str) -> None:
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    if widths[0] > widths[1]:
        wide = page.evaluate(
            """(w) => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > w)
                .slice(0, 8).map(e => e.outerHTML.slice(0, 100))""",
            widths[1],
        )
        raise AssertionError(f"{what}: the page scrolls sideways at 360 px ({widths}): {wide}")


def _failures(page: Any) -> list[str]:
    """What goes wrong in ``page`` from now on: requests answered 400 or more (a missing
    favicon...) and errors the page logs to its console."""
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else 0)
    page.on("console", lambda m: failed.append(m.text) if m.type == "error" else 0)
    return failed


MIN_LABEL_PX = 11  # the console's smallest text at 360 px is 14 px x 0.85


def _chart_labels_readable(page: Any, what: str) -> None:
    """Every chart's axis labels render at least ``MIN_LABEL_PX`` tall (their font size as
    drawn: the computed size scaled as the SVG is), inside the chart, none over another."""
    labels = page.evaluate(
        """() => [...document.querySelectorAll('svg.chart text.axis')].map(t => {
            const svg = t.ownerSVGElement, box = svg.getBoundingClientRect();
            const scale = box.width / svg.viewBox.baseVal.width;
            const r = t.getBoundingClientRect();
            return {text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * scale,
                    left: r.left, right: r.right, top: r.top, bottom: r.bottom,
                    inside: r.left >= box.left - 1 && r.right <= box.right + 1
                            && r.top >= box.top - 1 && r.bottom <= box.bottom + 1};
        })"""
    )
    assert labels, f"{what}: no chart label found"
    small = [(lb["text"], round(lb["px"], 1)) for lb in labels if lb["px"] < MIN_LABEL_PX]
    assert not small, f"{what}: chart labels under {MIN_LABEL_PX} px at 360 px: {small}"
    assert all(lb["inside"] for lb in labels), f"{what}: a chart label is cut off: {labels}"
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            apart = (
                a["right"] <= b["left"]
                or b["right"] <= a["left"]
                or a["bottom"] <= b["top"]
                or b["bottom"] <= a["top"]
            )
            assert apart, f"{what}: chart labels {a['text']!r} and {b['text']!r} overlap"


def _tables_show_their_last_column(page: Any, what: str) -> None:
    """Every table's last column is on screen as the page opens: within the viewport and within
    the box the table may scroll in, with no scrolling (nothing to find by swiping sideways).
    Rows hidden from view (a header kept for screen readers) are left out."""
    cut = page.evaluate(
        """() => {
            const vw = document.documentElement.clientWidth, out = [];
            const shown = (e) => { const r = e.getBoundingClientRect();
                                   return r.width > 1 && r.height > 1; };
            for (const table of document.querySelectorAll('table')) {
                if (!table.getClientRects().length) continue;  // in a closed <details>
                for (const row of table.rows) {
                    const cell = row.cells[row.cells.length - 1];
                    if (!cell || !shown(row.parentElement) || !shown(cell)) continue;
                    let box = table.parentElement;
                    while (box && !['auto', 'scroll', 'hidden'].includes(
                               getComputedStyle(box).overflowX))
                        box = box.parentElement;
                    const r = cell.getBoundingClientRect();
                    const b = box ? box.getBoundingClientRect() : {left: 0, right: vw};
                    if (r.right > Math.min(vw, b.right) + 1 || r.left < Math.max(0, b.left) - 1)
                        out.push([table.id || table.caption?.textContent.slice(0, 40),
                                  cell.textContent.trim().slice(0, 30),
                                  Math.round(r.right), Math.round(Math.min(vw, b.right))]);
                }
            }
            return out;
        }"""
    )
    assert not cut, f"{what}: last columns off screen at 360 px (table, cell, right, edge): {cut}"


def test_every_page_at_desktop_and_360px_and_the_overview_equals_v1_stats(
    api, fresh, browser, consumer
):
    seed_world(api, fresh)
    ids = seed_history(fresh)
    with api.client("ops") as ops:
        stats = ops.get("/v1/stats").json()
    for size, viewport in (("desktop", DESKTOP), ("360px", PHONE)):
        page = _page(browser, viewport)
        failed = _failures(page)
        page.goto(api.url + "/console/")
        assert "/console/login" in page.url
        _shot(page, f"login-{size}")
        _log_in(page, api, api.ops_key)
        with page.expect_navigation(url="**/console/?window=all"):
            page.get_by_label("Messages due in").select_option("all")  # submits on change
        cells = page.locator("#counts td[data-status]").evaluate_all(
            "els => els.map(e => [e.dataset.category, e.dataset.status, e.textContent])"
        )
        shown = {(c, s): int(n) for c, s, n in cells}
        assert shown == {
            (c, s): stats["by_category"][c].get(s, 0)
            for c in stats["by_category"]
            for s in stats["messages"]
        }
        totals = page.locator("#counts tfoot td").evaluate_all(
            "els => els.map(e => [e.dataset.total, e.textContent])"
        )
        assert {s: int(n) for s, n in totals} == stats["messages"]
        lat = stats["lateness_ms"]
        assert page.locator("[data-figure=p95]").text_content() == f"{lat['p95']:,} ms"
        assert page.locator("[data-no-consumer]").all_text_contents() == ["no consumer"] * 3
        assert page.get_by_role("img", name="Pushes sent per minute").count() == 1
        page.locator("#health [data-health]").wait_for()  # doctor's checks, loaded after
        assert page.locator("#health-checks th", has_text="scheduled delivery").count() == 1
        _shot(page, f"overview-{size}")
        if size == "360px":
            _no_sideways_scroll(page, "overview")
            _chart_labels_readable(page, "overview")
            _tables_show_their_last_column(page, "overview")

        _go(page, page.get_by_role("link", name="Upcoming"))
        assert int(page.locator("#pending-total").text_content()) > 0
        assert page.locator("#wakeups tbody tr").count() >= 1
        _shot(page, f"upcoming-{size}")
        if size == "360px":
            _no_sideways_scroll(page, "upcoming")
            _chart_labels_readable(page, "upcoming")
            _tables_show_their_last_column(page, "upcoming")

        _go(page, page.get_by_role("link", name="Problems"))
        assert page.locator(f"tr[data-message='{ids['missed']}']").count() == 1
        page.get_by_label("Status").select_option("failed")
        _go(page, page.get_by_role("button", name="Filter"))
        assert page.locator(f"tr[data-message='{ids['failed_device']}']").count() == 1
        assert page.get_by_role("button", name=f"Replay {ids['failed_project']}").count() == 1
        assert page.get_by_role("button", name=f"Replay {ids['failed_device']}").count() == 0
        page.get_by_label("Status").select_option("is_missed")
        _go(page, page.get_by_role("button", name="Filter"))
        _shot(page, f"problems-{size}")
        if size == "360px":
            _no_sideways_scroll(page, "problems")
            _tables_show_their_last_column(page, "problems")

        _go(page, page.get_by_role("link", name="Users"))
        assert page.locator("#users tbody tr").count() == len(USERS)
        _shot(page, f"users-{size}")
        if size == "360px":
            _no_sideways_scroll(page, "users")
            _tables_show_their_last_column(page, "users")
        _go(page, page.locator("#users").get_by_role("link", name="alice"))
        assert page.locator("#devices").get_by_text("phone-a").count() == 1
        assert page.locator("#reminders tbody tr").count() == 2
        assert page.locator("#timeline li").count() >= 5
        _shot(page, f"user-{size}")
        if size == "360px":
            _no_sideways_scroll(page, "user")
            _tables_show_their_last_column(page, "user")

        _go(page, page.locator("#timeline").get_by_role("link", name=ids["sent0"]))
        assert page.locator("#message-summary").get_by_text("success", exact=True).count() == 1
        assert "consumer-demo" in page.locator("#guard").text_content()
        assert token_of("alice") in page.locator("pre.doc").text_content()
        _shot(page, f"message-{size}")
        if size == "360px":
            _no_sideways_scroll(page, "message")
            _tables_show_their_last_column(page, "message")
        assert failed == [], f"{size}: requests failed or the console logged errors: {failed}"
        page.context.close()


def test_a_missed_message_replayed_from_problems_reaches_expo_once(api, fresh, browser, consumer):
    seed_world(api, fresh)
    ids = seed_history(fresh)
    missed = ids["missed"]
    page = _page(browser, DESKTOP)
    _log_in(page, api, api.ops_key)
    _go(page, page.get_by_role("link", name="Problems"))
    _go(page, page.get_by_role("button", name=f"Replay {missed}"))
    assert "1 is_missed message(s) would be replayed" in page.locator("#dry-run-count").inner_text()
    assert fresh[dbm.MESSAGES].find_one({"_id": missed})["status"] == "is_missed"  # a dry run
    assert api.fake.pushes() == []
    page.get_by_label("Why (recorded on each message)").fill("INC-9 broker outage")
    confirmation = page.evaluate(
        "() => [...new FormData(document.querySelector('form[action=\"/console/replays\"]'))]"
    )
    _go(page, page.get_by_role("button", name="Replay 1 message(s)"))
    page.wait_for_url("**/console/replays/replay:console:oncall:*")
    consumer_burst(api, "safety")  # the consumers send replays (the module's has no safety)
    page.locator("[data-done='yes']").wait_for()  # refreshed by the page's script
    assert page.locator(f"[data-status-of='{missed}']").inner_text() == "success"
    pushed = [p for p in api.fake.pushes() if p["data"].get("messageId") == missed]
    assert len(pushed) == 1 and pushed[0]["to"] == token_of("chen")
    doc = fresh[dbm.MESSAGES].find_one({"_id": missed})
    assert doc["status"] == "success" and doc["replay"]["by"] == "console:oncall"
    assert doc["replay"]["reason"] == "INC-9 broker outage"
    # The same confirmation sent again (a double click, a resubmitted form) sends nothing more.
    again = page.evaluate(
        """async (fields) => {
            const res = await fetch('/console/replays', {
                method: 'POST', body: new URLSearchParams(fields)});
            return [res.status, await res.text()];
        }""",
        confirmation,
    )
    assert again[0] == 409 and "Nothing to replay any more" in again[1]
    deadline = utcnow() + dt.timedelta(seconds=2)  # the consumer is running: still one push
    while utcnow() < deadline:
        page.wait_for_timeout(200)
    assert [p["data"].get("messageId") for p in api.fake.pushes()].count(missed) == 1
    page.context.close()


def test_a_wrong_key_an_app_key_and_a_missing_csrf_token_are_refused(api, fresh, browser):
    seed_world(api, fresh)
    ids = seed_history(fresh)
    page = _page(browser, PHONE)
    _log_in(page, api, "tzp_wrong-key")
    assert "/console/login" in page.url
    assert "That key is not known here" in page.get_by_role("alert").inner_text()
    _log_in(page, api, api.app_key)
    assert "has scope app: the console needs a key of scope ops" in (
        page.get_by_role("alert").inner_text()
    )
    assert page.context.cookies() and not [
        c for c in page.context.cookies() if c["name"] == "tzpush_console"
    ]
    _log_in(page, api, api.ops_key)
    session = next(c for c in page.context.cookies() if c["name"] == "tzpush_console")
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert page.evaluate("() => document.cookie") == ""  # not readable by scripts
    _go(page, page.get_by_role("link", name="Problems"))
    page.evaluate("() => document.querySelector('#replay-form input[name=csrf]').remove()")
    _go(page, page.get_by_role("button", name=f"Replay {ids['missed']}"))
    assert "security token is missing or wrong" in page.locator("h1").inner_text()
    assert fresh[dbm.MESSAGES].find_one({"_id": ids["missed"]})["status"] == "is_missed"
    assert api.fake.pushes() == []
    page.context.close()


def test_read_only_mode_hides_the_actions_and_the_server_refuses_them(stack, db, browser):
    prepare(db)
    env = {"TZPUSH_API__CONSOLE_READ_ONLY": "true"}
    with start_console_api(stack.settings, **env) as server:
        seed_world(server, db)
        ids = seed_history(db)
        page = _page(browser, DESKTOP)
        _log_in(page, server, server.ops_key)
        assert page.locator(".who").get_by_text("read-only").count() == 1
        _go(page, page.get_by_role("link", name="Problems"))
        assert page.locator(f"tr[data-message='{ids['missed']}']").count() == 1
        assert page.get_by_role("button", name="Replay").count() == 0
        assert page.locator("input[name=ids]").count() == 0
        page.goto(f"{server.url}/console/messages/{ids['missed']}")
        assert page.get_by_role("button", name="Replay this message…").count() == 0
        # The action sent anyway, from the page itself with its session and CSRF token:
        status = page.evaluate(
            """async (id) => {
                const csrf = document.querySelector('input[name=csrf]').value;
                const body = new URLSearchParams({csrf, status: 'is_missed', one: id});
                const res = await fetch('/console/replays', {method: 'POST', body});
                return [res.status, await res.text()];
            }""",
            ids["missed"],
        )
        assert status[0] == 403 and "the console is read-only" in status[1]
        assert db[dbm.MESSAGES].find_one({"_id": ids["missed"]})["status"] == "is_missed"
        assert server.fake.pushes() == []
        page.context.close()


def test_screenshots_are_small_pngs_referenced_from_the_readme():
    """The committed screenshots (made by the page test above with ``TZPUSH_UPDATE_SCREENSHOTS=1``):
    every page at both sizes, each small."""
    readme = (REPO / "README.md").read_text()
    for name in ("login", "overview", "upcoming", "problems", "users", "user", "message"):
        for size in ("desktop", "360px"):
            path = SHOTS / f"{name}-{size}.png"
            assert path.exists(), path
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert path.stat().st_size < 150_000, (path, path.stat().st_size)
        assert f"docs/console/{name}-desktop.png" in readme
