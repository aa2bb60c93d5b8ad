"""The bulk management path under attack: logins and batches racing on the same devices and
token strings through a real ``tzpush api``, the login coalescer when a batch-mate fails, and a
database outage in the middle of a batch."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from api.coalesce import Coalescer
from shared.store import db as dbm
from tests.integration.test_api_support import plan_window, prepare, soon_hhmm

Doc = dict[str, Any]


def tok(n: int | str) -> str:
    return f"ExponentPushToken[hostile-{n}]"


@pytest.fixture
def app(api, db):
    prepare(db)
    with api.client("app") as c:
        yield c


def _users(app: httpx.Client, n: int) -> None:
    items = [
        {"op": "user", "userId": f"h{i}", "user": {"timezone": "Europe/Berlin"}} for i in range(n)
    ]
    r = app.post("/v1/batch", json={"items": items})
    assert r.status_code == 200 and r.json()["failed"] == 0, r.text


def _one_active_each(db) -> list[Doc]:
    """Exactly one active registration per device id and per token string."""
    active = list(db[dbm.TOKENS].find({"isActive": True}))
    by_device = Counter(t["deviceId"] for t in active)
    by_token = Counter(t["token"] for t in active)
    assert max(by_device.values()) == 1, by_device
    assert max(by_token.values()) == 1, by_token
    return active


# -- races ---------------------------------------------------------------------------------
def test_twenty_logins_and_batches_racing_on_the_same_installs_keep_one_registration_each(
    api, app, db
):
    """20 threads at once: single logins (coalesced) and batches, two users on the same device
    id, two users on the same token string, and unrelated logins beside them."""
    _users(app, 10)
    calls: list[tuple[str, str, Any]] = []
    for i in range(6):  # h0..h5 fight over device "shared-dev" with their own tokens
        calls.append(("PUT", f"/v1/users/h{i}/devices/shared-dev", {"token": tok(f"d{i}")}))
    for i in range(6):  # h0..h5 fight over one token string under their own device ids
        calls.append(("PUT", f"/v1/users/h{i}/devices/own-{i}", {"token": tok("shared")}))
    for i in range(6, 10):  # unrelated logins, coalesced with the fights
        calls.append(("PUT", f"/v1/users/h{i}/devices/solo-{i}", {"token": tok(f"solo{i}")}))
    for i in range(4):  # batches that take the same device and token
        items = [
            {
                "op": "device",
                "userId": f"h{6 + i}",
                "deviceId": "shared-dev",
                "device": {"token": tok(f"b{i}")},
            },
            {
                "op": "device",
                "userId": f"h{6 + i}",
                "deviceId": f"batch-{i}",
                "device": {"token": tok("shared")},
            },
        ]
        calls.append(("POST", "/v1/batch", {"items": items}))
    assert len(calls) == 20
    start = threading.Barrier(len(calls))

    def call(c: tuple[str, str, Any]) -> httpx.Response:
        method, path, body = c
        with api.client("app") as client:
            start.wait()
            return client.request(method, path, json=body)

    with ThreadPoolExecutor(len(calls)) as pool:
        answers = list(pool.map(call, calls))
    for (_, path, _), r in zip(calls, answers, strict=True):
        assert r.status_code == 200, (path, r.status_code, r.text, api.log_tail())
        if path == "/v1/batch":
            assert [x["status"] for x in r.json()["results"]] == [200, 200], r.text
    active = _one_active_each(db)
    holders = {t["deviceId"] for t in active}
    assert {"shared-dev", *(f"solo-{i}" for i in range(6, 10))} <= holders
    assert sum(1 for t in active if t["token"] == tok("shared")) == 1
    # Every loser was turned off with the reason, and its user stamped for a recheck.
    lost = list(db[dbm.TOKENS].find({"isActive": False}))
    assert lost and all(t["deactivationReason"].startswith("token replaced") for t in lost)
    stamped = {c["_id"] for c in db[dbm.CHANGES].find()}
    assert {t["userId"] for t in lost} <= stamped


# -- the login coalescer -------------------------------------------------------------------
def _waiting(c: Coalescer[str, str], items: Sequence[str]) -> list[Any]:
    """Submit ``items`` together; each one's result or exception (never waiting forever)."""
    futures = [c.submit(x) for x in items]
    out: list[Any] = []
    for f in futures:
        try:
            out.append(f.result(timeout=10))
        except Exception as exc:
            out.append(exc)
    return out


def _held(apply: Callable[[Sequence[str]], Sequence[str]]) -> tuple[Coalescer[str, str], Any]:
    """A coalescer whose first call waits until released, so the next items queue together."""
    gate = threading.Event()
    first = threading.Event()

    def gated(items: Sequence[str]) -> Sequence[str]:
        if not first.is_set():
            first.set()
            gate.wait(10)
        return apply(items)

    c: Coalescer[str, str] = Coalescer(gated, name="test-coalescer")
    c.submit("warm-up")
    first.wait(10)
    return c, gate


def test_a_login_whose_batch_mate_hits_a_bug_gets_its_own_answer():
    def apply(items: Sequence[str]) -> list[str]:
        if "bug" in items:
            raise KeyError("a bug")
        return [f"done {x}" for x in items]

    c, gate = _held(apply)
    try:
        futures = [c.submit(x) for x in ("a", "bug", "b")]
        gate.set()
        assert futures[0].result(timeout=10) == "done a"
        assert futures[2].result(timeout=10) == "done b"
        with pytest.raises(KeyError):
            futures[1].result(timeout=10)
        assert _waiting(c, ["c"]) == ["done c"]  # the worker still serves
    finally:
        c.close()


def test_the_coalescer_never_leaves_a_login_waiting_forever():
    """An ``apply`` that breaks its contract (fewer outcomes than items) fails the logins it
    cannot answer, and the worker lives on."""
    calls = {"n": 0}

    def apply(items: Sequence[str]) -> list[str]:
        calls["n"] += 1
        return [f"done {x}" for x in items][: 1 if calls["n"] == 2 else None]

    c, gate = _held(apply)
    try:
        futures = [c.submit(x) for x in ("a", "b")]
        gate.set()
        t0 = time.monotonic()
        for f in futures:
            with contextlib.suppress(Exception):  # an error is fine, waiting forever is not
                f.result(timeout=10)
        assert time.monotonic() - t0 < 9, "a login waited for an answer that never came"
        assert _waiting(c, ["c"]) == ["done c"]
    finally:
        c.close()


# -- an outage in the middle of a batch ----------------------------------------------------
def test_a_batch_cut_by_an_outage_and_sent_again_leaves_its_reminders_planned(api, app, db):
    """The outage strikes after the batch's writes and before their planning (the last step):
    the batch is a 503, and sending it again must plan what the first attempt wrote, though
    the second finds every item already stored ("unchanged")."""
    from api.manage import ApiManager
    from creator import upserts
    from creator.service import open_planner
    from shared.errors import TransientError
    from tests.integration.test_api_support import plan_window

    _users(app, 1)
    plan_window(api, db)
    items: list[upserts.Item] = [
        upserts.Login("h0", "cut-dev", tok("cut")),
        upserts.ReminderPut("h0", "cut-r", upserts.ReminderSpec("meal", "lunch", "12:00")),
    ]
    with open_planner(api.settings) as planner:
        manager = ApiManager(planner.db, planner, api.settings)
        real = planner.plan_users
        calls = {"n": 0}

        def cut(user_ids, **kw):  # the database goes away exactly here, once
            calls["n"] += 1
            if calls["n"] == 1:
                raise TransientError("database unavailable (injected)")
            return real(user_ids, **kw)

        planner.plan_users = cut  # type: ignore[method-assign]
        with pytest.raises(TransientError):
            upserts.apply(manager, items)
        assert not db[dbm.MESSAGES].count_documents({"reminderId": "cut-r"})
        again = upserts.apply(manager, items)  # the backend sends the batch again
    assert all(isinstance(o, upserts.Done) for o in again), again
    # A daily reminder has one occurrence in the planned 24 h, on the new device.
    planned = list(db[dbm.MESSAGES].find({"reminderId": "cut-r", "status": "pending"}))
    assert len(planned) == 1, "the resent batch left its reminder unplanned"


def test_a_batch_while_the_database_is_away_is_a_503_and_safe_to_send_again(api, app, db, stack):
    _users(app, 1)
    items = [
        {"op": "user", "userId": "away", "user": {"timezone": "Asia/Tashkent"}},
        {"op": "device", "userId": "away", "deviceId": "away-dev", "device": {"token": tok("a")}},
        {"op": "device", "userId": "h0", "deviceId": "h0-dev", "device": {"token": tok("h0")}},
    ]
    stack.stop("mongo")
    try:
        r = app.post("/v1/batch", json={"items": items})
        login = app.put("/v1/users/h0/devices/h0-dev", json={"token": tok("h0")})
        ready = app.get("/readyz")
    finally:
        stack.start("mongo")
    assert ready.status_code == 503 and ready.headers["content-type"] == "application/problem+json"
    assert ready.json()["problems"]["database"].startswith("unreachable"), ready.text
    assert ready.json()["type"] == "/problems/not-ready" and ready.json()["ok"] is False
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == "1" and r.json()["type"] == "/problems/unavailable"
    assert login.status_code == 503, login.text
    again = app.post("/v1/batch", json={"items": items})
    assert [x["status"] for x in again.json()["results"]] == [200, 200, 200], again.text
    _one_active_each(db)


@contextlib.contextmanager
def _api_commands_failing(mongo_client, commands: list[str], *, skip: int, times: int):
    """The API process's ``commands`` fail by a dropped connection (SecantusDB's
    ``failCommand``, scoped to the tzpush processes' appName), after ``skip`` that pass,
    ``times`` times; off again on exit."""
    mongo_client.admin.command(
        {
            "configureFailPoint": "failCommand",
            "mode": {"skip": skip, "times": times},
            "data": {"failCommands": commands, "closeConnection": True, "appName": "tzpush"},
        }
    )
    try:
        yield
    finally:
        mongo_client.admin.command({"configureFailPoint": "failCommand", "mode": "off"})


def test_a_post_cut_by_an_outage_and_sent_again_under_its_key_creates_one_reminder(
    api, app, db, mongo_client
):
    """The reminder is written, then the connection drops as its messages are inserted (the
    driver's retry too): a 503. Sent again under the same Idempotency-Key, the POST must
    finish that reminder, not create a second one under a new id."""
    _users(app, 1)
    assert app.put("/v1/users/h0/devices/d0", json={"token": tok("post")}).status_code == 200
    plan_window(api, db)
    body = {"category": "meal", "label": "soon", "at": soon_hhmm("Europe/Berlin")}
    headers = {"Idempotency-Key": "cut-by-an-outage"}
    # The API's inserts: the key's record, the reminder, then its messages (and the retry).
    with _api_commands_failing(mongo_client, ["insert"], skip=2, times=2):
        first = app.post("/v1/users/h0/reminders", json=body, headers=headers)
    assert first.status_code == 503, first.text
    assert db[dbm.REMINDERS].count_documents({"userId": "h0"}) == 1  # written before the cut
    again = app.post("/v1/users/h0/reminders", json=body, headers=headers)
    assert again.status_code == 201, again.text
    mine = list(db[dbm.REMINDERS].find({"userId": "h0"}))
    assert [d["_id"] for d in mine] == [again.json()["id"]]
    assert db[dbm.MESSAGES].count_documents({"reminderId": again.json()["id"]}) >= 1
    replayed = app.post("/v1/users/h0/reminders", json=body, headers=headers)
    assert replayed.json()["id"] == again.json()["id"]
    assert replayed.headers["idempotent-replayed"] == "true"


def test_a_post_whose_cut_could_not_be_recorded_is_finished_at_once_when_sent_again(
    api, app, db, mongo_client
):
    """The outage also refuses the write that marks the attempt cut: the key's record still
    says running. This process knows it is not (it runs no such request): the retry takes it
    over at once, instead of being told for a minute that the request is still in progress."""
    _users(app, 1)
    body = {"category": "meal", "label": "cut twice", "at": "09:00"}
    headers = {"Idempotency-Key": "cut-unrecorded"}
    with _api_commands_failing(mongo_client, ["insert", "update"], skip=2, times=50):
        first = app.post("/v1/users/h0/reminders", json=body, headers=headers)
    assert first.status_code == 503, first.text
    again = app.post("/v1/users/h0/reminders", json=body, headers=headers)
    assert again.status_code == 201, again.text
    assert [d["_id"] for d in db[dbm.REMINDERS].find({"userId": "h0"})] == [again.json()["id"]]
