"""The per-key request rate limit (api.limits): the bucket itself, and the 429 it answers."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.app import create_app
from api.deps import Backend
from api.keys import KeyRing, hash_key, new_key
from api.limits import RateLimiter
from shared.errors import NotFoundError
from shared.settings import ApiKey, Settings


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_bucket_allows_the_burst_then_the_rate_per_key():
    clock = Clock()
    limiter = RateLimiter(rate=2, burst=3, clock=clock)
    assert [limiter.take("a") for _ in range(3)] == [0, 0, 0]
    assert limiter.take("a") == pytest.approx(0.5)  # one token comes back every 0.5 s
    assert limiter.take("b") == 0  # each key has its own bucket
    clock.t += 0.5
    assert limiter.take("a") == 0 and limiter.take("a") > 0
    clock.t += 100  # a quiet spell refills up to the burst, no further
    assert [limiter.take("a") for _ in range(4)][-1] > 0
    assert RateLimiter.retry_after(0.01) == "1" and RateLimiter.retry_after(2.2) == "3"
    with pytest.raises(ValueError):
        RateLimiter(rate=0)


class NoUsers:
    now = None

    def get_user(self, user_id: str) -> Any:
        raise NotFoundError(f"no user {user_id!r}")


def _client(limiter: RateLimiter) -> tuple[TestClient, dict[str, str], dict[str, str]]:
    keys = {"backend": new_key(), "other": new_key()}
    ring = KeyRing(
        [ApiKey(name=n, scope="app", sha256=SecretStr(hash_key(k))) for n, k in keys.items()]
    )
    backend = Backend(
        settings=Settings.load(),
        manager=NoUsers(),  # type: ignore[arg-type]
        keys=ring,
        idempotency=None,  # type: ignore[arg-type]
        limiter=limiter,
    )
    client = TestClient(create_app(backend))
    return (
        client,
        {"Authorization": f"Bearer {keys['backend']}"},
        {"Authorization": f"Bearer {keys['other']}"},
    )


def test_over_the_limit_is_a_429_problem_with_retry_after():
    clock = Clock()
    client, backend, other = _client(RateLimiter(rate=1, burst=2, clock=clock))
    assert [client.get("/v1/users/u1", headers=backend).status_code for _ in range(2)] == [
        404,
        404,
    ]
    answer = client.get("/v1/users/u1", headers=backend)
    assert answer.status_code == 429
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["retry-after"] == "1"
    body = answer.json()
    assert body["type"] == "/problems/too-many-requests" and body["status"] == 429
    assert "'backend'" in body["detail"] and body["instance"] == "/v1/users/u1"
    # Another key is not held back; probes and refused keys are not counted.
    assert client.get("/v1/users/u1", headers=other).status_code == 404
    assert client.get("/healthz").status_code == 200
    assert client.get("/v1/users/u1", headers={"Authorization": "Bearer nope"}).status_code == 401
    clock.t += 1.0
    assert client.get("/v1/users/u1", headers=backend).status_code == 404
    # The OpenAPI document says so for every keyed route.
    doc = client.get("/openapi.json").json()
    assert "429" in doc["paths"]["/v1/users/{userId}"]["get"]["responses"]
    assert "429" not in doc["paths"]["/healthz"]["get"]["responses"]
