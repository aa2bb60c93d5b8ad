"""Keys are not tenants (docs/api.md, "Keys and scopes"): every ``app`` key of one deployment
reads, changes and erases every user of it, push tokens included. A deployment serving several
apps runs one tzpush per app (its own database and queue prefix); this pins the behaviour the
doc states, so neither can change without the other."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from api.keys import hash_key, new_key
from tests.integration.test_api_support import ApiServer, prepare, start_api

APP_KEY, OTHER_APP_KEY, OPS_KEY = new_key(), new_key(), new_key()
KEYS = [
    {"name": "backend", "scope": "app", "sha256": hash_key(APP_KEY)},
    {"name": "other-app", "scope": "app", "sha256": hash_key(OTHER_APP_KEY)},
    {"name": "oncall", "scope": "ops", "sha256": hash_key(OPS_KEY)},
]


@pytest.fixture(scope="module")
def api(stack) -> Iterator[ApiServer]:
    """The API with two app keys (two backends) and an ops key."""
    with start_api(stack.settings, env={"TZPUSH_API__KEYS": json.dumps(KEYS)}) as server:
        server.app_key, server.ops_key = APP_KEY, OPS_KEY
        yield server


def test_any_app_key_reads_changes_and_erases_every_user_of_the_deployment(api, db) -> None:
    prepare(db)
    token = "ExponentPushToken[tenancy-token]"
    with api.client("app") as mine:
        assert mine.put("/v1/users/alice", json={"timezone": "Asia/Tashkent"}).status_code == 200
        assert mine.put("/v1/users/alice/devices/p1", json={"token": token}).status_code == 200
    other = {"Authorization": f"Bearer {OTHER_APP_KEY}"}
    with httpx.Client(base_url=api.url, headers=other, timeout=30) as theirs:
        devices = theirs.get("/v1/users/alice/devices").json()["items"]
        assert [d["token"] for d in devices] == [token]
        changed = theirs.put("/v1/users/alice", json={"timezone": "Europe/Berlin"})
        assert changed.status_code == 200
        assert theirs.delete("/v1/users/alice").status_code == 204
    with api.client("app") as mine:
        assert mine.get("/v1/users/alice").status_code == 404
