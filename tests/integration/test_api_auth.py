"""tzpush api: keys and scopes, problem details for every error, the body limit, probes."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator

import pytest

from tests.integration.test_api_support import ApiServer, prepare, start_api

PROBLEM = "application/problem+json"
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def api(stack) -> Iterator[ApiServer]:
    with start_api(stack.settings, max_body_bytes=LIMIT) as server:
        yield server


@pytest.fixture
def app(api, db):
    prepare(db)
    with api.client("app") as c:
        yield c


def _problem(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    assert body["type"].startswith("/problems/")
    return body


def test_no_key_or_a_wrong_key_is_401(api, db):
    with api.client(None) as c:
        body = _problem(c.get("/v1/users/u1"), 401)
        assert c.get("/v1/users/u1").headers["www-authenticate"].startswith("Bearer")
    assert "Bearer" in body["detail"]
    with api.client("tzp_not-a-key") as c:
        _problem(c.get("/v1/users/u1"), 401)
    with api.client(None, headers={"Authorization": "Basic dXNlcjpwYXNz"}) as c:
        _problem(c.get("/v1/users/u1"), 401)


def test_an_app_key_is_403_on_operator_resources_and_an_ops_key_may_do_both(api, app):
    assert _problem(app.get("/v1/stats"), 403)["detail"].endswith("this needs ops")
    _problem(app.post("/v1/replays", json={"dryRun": True}), 403)
    _problem(app.get("/metrics"), 403)
    with api.client("ops") as ops:
        assert ops.get("/v1/stats").status_code == 200
        assert ops.get("/metrics").status_code == 200
        assert ops.put("/v1/users/o1", json={"timezone": "UTC"}).status_code == 200


def test_an_unknown_time_zone_names_the_field_and_the_value(app):
    r = app.put("/v1/users/u1", json={"timezone": "Europe/Berln", "dailyCap": 0})
    body = _problem(r, 422)
    errors = {e["name"]: e for e in body["errors"]}
    assert errors["timezone"]["message"] == "unknown time zone 'Europe/Berln'"
    assert errors["timezone"]["in"] == "body"
    assert "dailyCap" in errors


def test_validation_uses_the_cli_rules(app):
    assert app.put("/v1/users/u1", json={"timezone": "Asia/Tashkent"}).status_code == 200
    cases = {
        "at": ({"at": "7:30"}, "time of day must be 'HH:MM'"),
        "category": ({"category": "lunch"}, "unknown category 'lunch'"),
        "offsetMinutes": ({"offsetMinutes": 5000}, "less than or equal to 1440"),
        "weekdays.0": ({"weekdays": ["monday"]}, "'mon'"),
        "label": ({"label": "a\tb"}, "control character"),
        "data": ({"data": {"x": "y" * 5000}}, "over the 4096-byte limit"),
        "timezone": ({"timezone": "UTC"}, "is not a field of this resource"),
    }
    base = {"category": "meal", "label": "lunch", "at": "12:30"}
    for name, (change, message) in cases.items():
        r = app.put("/v1/users/u1/reminders/r1", json={**base, **change})
        body = _problem(r, 422)
        assert any(e["name"] == name and message in e["message"] for e in body["errors"]), (
            name,
            body,
        )
    r = app.put("/v1/users/u1/devices/d1", json={"token": "not-a-token"})
    assert "not an Expo push token" in _problem(r, 422)["errors"][0]["message"]
    r = app.get("/v1/users/" + "x" * 129)
    assert _problem(r, 422)["errors"][0]["name"] == "userId"


def test_json_that_the_database_could_not_store_is_refused_not_500(app):
    app.put("/v1/users/u1", json={"timezone": "UTC"})
    base = {"category": "meal", "label": "lunch", "at": "12:30"}
    bad_data = [
        {"a\u0000b": 1},
        {"$set": 1},
        {"n": 2**70},
        json.loads('{"x": NaN}'),
        {"deep": json.loads("[" * 40 + "]" * 40)},
    ]
    for data in bad_data:
        raw = json.dumps({**base, "data": data})
        r = app.put(
            "/v1/users/u1/reminders/r1", content=raw, headers={"content-type": "application/json"}
        )
        _problem(r, 422)
    r = app.put(
        "/v1/users/u1/reminders/r1",
        content=b'{"category": "meal", "label": "x", "at": "12:30", "title": "\\ud800"}',
        headers={"content-type": "application/json"},
    )
    assert _problem(r, 422)["errors"][0]["name"] == "title"
    r = app.put("/v1/users/u1", content=b"{not json", headers={"content-type": "application/json"})
    _problem(r, 400)
    r = app.put(
        "/v1/users/u1",
        content=b"[" * 100_00 + b"]" * 100_00,
        headers={"content-type": "application/json"},
    )
    assert r.status_code in (400, 422), r.text


def test_a_body_over_the_limit_is_413_whether_announced_or_streamed(app):
    big = json.dumps({"timezone": "UTC", "x": "y" * LIMIT})
    _problem(
        app.put("/v1/users/u1", content=big, headers={"content-type": "application/json"}), 413
    )

    def chunks() -> Iterator[bytes]:
        yield big[: LIMIT // 2].encode()
        yield big[LIMIT // 2 :].encode()

    r = app.put("/v1/users/u1", content=chunks(), headers={"content-type": "application/json"})
    _problem(r, 413)


def test_unknown_routes_and_methods_are_problems_too(app):
    _problem(app.get("/v1/nothing"), 404)
    _problem(app.post("/v1/users/u1"), 405)
    _problem(app.get("/v1/users/nobody"), 404)
    _problem(app.get("/v1/messages/nope"), 404)


def test_probes_and_documents_need_no_key(api):
    with api.client(None) as c:
        assert c.get("/healthz").json() == {"ok": True, "problems": {}}
        assert c.get("/readyz").json()["ok"] is True
        doc = c.get("/openapi.json").json()
        assert "/v1/users/{userId}/reminders" in doc["paths"]
        assert doc["components"]["securitySchemes"]
        assert c.get("/docs").status_code == 200


# -- every invalid field named, in one answer ------------------------------------------------
def _names(body) -> set[str]:
    return {e["name"] for e in body["errors"]}


def test_an_unknown_category_is_listed_with_the_other_invalid_fields(app):
    app.put("/v1/users/u1", json={"timezone": "UTC"})
    bad = {"category": "lunch", "label": "x", "at": "25:00", "offsetMinutes": 99999}
    body = _problem(app.put("/v1/users/u1/reminders/r1", json=bad), 422)
    assert _names(body) == {"category", "at", "offsetMinutes"}, body
    assert any("unknown category 'lunch'" in e["message"] for e in body["errors"])
    r = app.put("/v1/users/u2", json={"timezone": "Europe/Berln", "categories": {"lunch": True}})
    body = _problem(r, 422)
    assert _names(body) == {"timezone", "categories.lunch"}, body
    item = {"op": "reminder", "userId": "u1", "reminderId": "r2", "reminder": bad}
    result = app.post("/v1/batch", json={"items": [item]}).json()["results"][0]
    assert result["status"] == 422
    names = {e["name"] for e in result["problem"]["errors"]}
    assert names == {"reminder.category", "reminder.at", "reminder.offsetMinutes"}, result


def test_a_patch_names_each_field_it_may_not_null(app):
    app.put("/v1/users/u1", json={"timezone": "UTC"})
    app.put("/v1/users/u1/reminders/r1", json={"category": "meal", "label": "x", "at": "12:30"})
    r = app.patch("/v1/users/u1/reminders/r1", json={"category": None, "at": None, "title": None})
    body = _problem(r, 422)
    assert _names(body) == {"category", "at"}, body
    assert all(e["message"] == "cannot be null" for e in body["errors"])


def test_a_batch_answers_an_item_that_is_not_an_object_on_its_own(app):
    good = {"op": "user", "userId": "u9", "user": {"timezone": "UTC"}}
    r = app.post("/v1/batch", json={"items": [None, good, 5, "user"]})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["status"] for x in results] == [422, 200, 422, 422]
    assert "object" in results[0]["problem"]["detail"]
    extra = {**good, "zzz": 1}
    problem = app.post("/v1/batch", json={"items": [extra]}).json()["results"][0]["problem"]
    assert problem["errors"] == [
        {"name": "zzz", "in": "body", "message": "is not a field of this resource"}
    ]


def test_a_body_that_is_not_json_by_its_content_type_is_415(app):
    r = app.put(
        "/v1/users/u1",
        content=b"timezone=UTC",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    body = _problem(r, 415)
    assert "Content-Type: application/json" in body["detail"]
    r = app.put("/v1/users/u1", content=b'{"timezone": "UTC"}')  # none said
    assert "said none" in _problem(r, 415)["detail"]
    r = app.put(
        "/v1/users/u1",
        content=b'{"timezone": "UTC"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 200, r.text
    # The path as routed (decoded), and the first Content-Type (the one the body is read by).
    r = app.put("/%761/users/u1", content=b"timezone=UTC", headers={"content-type": "text/plain"})
    _problem(r, 415)
    two = [("content-type", "text/plain"), ("content-type", "application/json")]
    _problem(app.put("/v1/users/u1", content=b'{"timezone": "UTC"}', headers=two), 415)


def test_a_trailing_slash_is_a_404_that_names_the_path_not_a_redirect(app):
    app.put("/v1/users/u1", json={"timezone": "UTC"})
    body = _problem(app.get("/v1/users/u1/"), 404)
    assert "/v1/users/u1" in body["detail"] and "trailing slash" in body["detail"]


def test_a_plus_sent_unencoded_in_a_query_is_explained(app, api):
    app.put("/v1/users/u1", json={"timezone": "UTC"})
    r = app.get("/v1/users/u1/messages?since=2026-12-01T10:00:00+05:00")
    message = _problem(r, 422)["errors"][0]["message"]
    assert "%2B" in message, message
    with api.client("ops") as ops:  # in a JSON body a space is a space: no such hint
        r = ops.post("/v1/replays", json={"since": "2026-12-01T10:00:00 05:00", "dryRun": True})
    [error] = _problem(r, 422)["errors"]
    assert "%2B" not in error["message"] and error["name"] == "since", error


def test_a_query_parameter_given_twice_is_refused(app):
    app.put("/v1/users/u1", json={"timezone": "UTC"})
    body = _problem(app.get("/v1/users/u1/messages?limit=5&limit=50"), 422)
    assert body["errors"] == [
        {"name": "limit", "in": "query", "message": "given 2 times; give it once"}
    ]
    _problem(app.get("/v%31/users/u1/messages?limit=5&limit=50"), 422)


def test_a_reused_idempotency_key_has_its_own_title(app):
    app.put("/v1/users/u1", json={"timezone": "UTC"})
    body = {"category": "meal", "label": "x", "at": "12:30"}
    headers = {"Idempotency-Key": "title"}
    assert app.post("/v1/users/u1/reminders", json=body, headers=headers).status_code == 201
    r = app.post("/v1/users/u1/reminders", json={**body, "label": "y"}, headers=headers)
    assert _problem(r, 422)["title"] == "Idempotency-Key reused"


def test_a_created_resource_shows_the_instants_a_read_shows(app):
    app.put("/v1/users/u1", json={"timezone": "UTC"})
    body = {"category": "meal", "label": "x", "at": "12:30"}
    created = app.put("/v1/users/u1/reminders/r1", json=body).json()
    read = app.get("/v1/users/u1/reminders/r1").json()
    assert created["createdAt"] == read["createdAt"] and created == read
    posted = app.post("/v1/users/u1/reminders", json=body).json()
    assert posted == app.get(f"/v1/users/u1/reminders/{posted['id']}").json()


def test_the_api_stops_cleanly_on_sigterm(stack):
    """ECS, compose and ``make run`` stop it with SIGTERM: it finishes and exits 0, not 143."""
    with start_api(stack.settings) as server:
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(20) == 0, server.log_tail()


def test_the_openapi_document_lists_the_415_of_every_body(api):
    with api.client(None) as c:
        doc = c.get("/openapi.json").json()
    missing = [
        f"{method.upper()} {path}"
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if "requestBody" in op and "415" not in op["responses"]
    ]
    assert missing == []


def test_a_cursor_from_another_list_is_refused(app):
    app.put("/v1/users/u1", json={"timezone": "UTC"})
    for i in range(3):
        body = {"category": "meal", "label": f"l{i}", "at": "12:30"}
        app.put(f"/v1/users/u1/reminders/r{i}", json=body)
        app.put(f"/v1/users/u1/devices/d{i}", json={"token": f"ExponentPushToken[c-{i}]"})
    reminders = app.get("/v1/users/u1/reminders?limit=1").json()["next"]
    devices = app.get("/v1/users/u1/devices?limit=1").json()["next"]
    after_r = reminders.split("after=")[1]
    after_d = devices.split("after=")[1]
    body = _problem(app.get(f"/v1/users/u1/devices?after={after_r}"), 422)
    assert body["errors"][0]["name"] == "after"
    _problem(app.get(f"/v1/users/u1/reminders?after={after_d}"), 422)
    assert app.get(devices).status_code == 200 and app.get(reminders).status_code == 200
