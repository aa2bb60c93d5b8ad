"""What one request may cost is bounded: a user has at most
``TZPUSH_CREATOR__MAX_REMINDERS_PER_USER`` reminders (a new one past it is a 409 problem naming
the setting, in a single call and in a batch alike); changing one they have is never refused.
Items per batch (``MAX_ITEMS``) and bytes per body (``TZPUSH_API__MAX_BODY_BYTES``) are bounded
too (tests/integration/test_api_auth.py, test_api_hostile_batch.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.test_api_support import ApiServer, prepare, start_api

LIMIT = 3


@pytest.fixture(scope="module")
def api(stack) -> Iterator[ApiServer]:
    env = {"TZPUSH_CREATOR__MAX_REMINDERS_PER_USER": str(LIMIT)}
    with start_api(stack.settings, env=env) as server:
        yield server


def _body(label: str) -> dict:
    return {"category": "meal", "label": label, "at": "12:30"}


def test_a_user_has_at_most_the_configured_reminders_single_or_batched(api, db):
    prepare(db)
    with api.client("app") as app:
        assert app.put("/v1/users/u1", json={"timezone": "Asia/Tashkent"}).status_code == 200
        for i in range(LIMIT):
            assert app.put(f"/v1/users/u1/reminders/r{i}", json=_body(f"l{i}")).status_code == 201
        over = app.put("/v1/users/u1/reminders/r9", json=_body("l9"))
        assert over.status_code == 409, over.text
        assert over.headers["content-type"].startswith("application/problem+json")
        assert "TZPUSH_CREATOR__MAX_REMINDERS_PER_USER" in over.json()["detail"]
        changed = app.put("/v1/users/u1/reminders/r0", json=_body("changed"))
        assert changed.status_code == 200, changed.text
        items = [
            {"op": "reminder", "userId": "u1", "reminderId": f"b{i}", "reminder": _body("b")}
            for i in range(2)
        ]
        answer = app.post("/v1/batch", json={"items": items})
        assert answer.status_code == 200, answer.text
        assert [r["status"] for r in answer.json()["results"]] == [409, 409], answer.text
        listed = app.get("/v1/users/u1/reminders").json()["items"]
        assert len(listed) == LIMIT
