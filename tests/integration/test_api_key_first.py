"""A request to the API's resources without a valid key is refused (401) before its body is read:
the headers and the first kilobyte of a 3.9 MB body get the answer at once, while a request with
a valid key is still waiting for the rest of its body."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

BODY_BYTES = 3_900_000
ANSWER_WAIT_S = 5.0


def _first_answer_line(url: str, authorization: str | None) -> str | None:
    """Send a POST announcing a 3.9 MB body but only its first kilobyte; the status line the
    server answers within ANSWER_WAIT_S, or None when it is still waiting for the body."""
    where = urlsplit(url)
    head = [
        "POST /v1/batch HTTP/1.1",
        f"Host: {where.netloc}",
        "Content-Type: application/json",
        f"Content-Length: {BODY_BYTES}",
    ]
    if authorization is not None:
        head.append(f"Authorization: {authorization}")
    first = b'{"items": [' + b" " * 1000
    with socket.create_connection((where.hostname, where.port), timeout=ANSWER_WAIT_S) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + first)
        try:
            data = sock.recv(4096)
        except TimeoutError:
            return None
    return data.split(b"\r\n", 1)[0].decode() if data else None


def test_a_request_without_a_valid_key_is_refused_before_its_body_is_read(api) -> None:
    for authorization in (None, "Bearer not-a-key", "Basic dXNlcjpwYXNz"):
        line = _first_answer_line(api.url, authorization)
        assert line is not None, f"{authorization!r}: no answer until the whole body came"
        assert " 401 " in line + " ", (authorization, line)


def test_a_request_with_a_valid_key_still_reads_its_body(api) -> None:
    assert _first_answer_line(api.url, f"Bearer {api.app_key}") is None


def test_the_early_401_is_the_same_problem_as_the_routes_own(api) -> None:
    import httpx

    body = json.dumps({"items": []})
    headers = {"Content-Type": "application/json"}
    answer = httpx.post(api.url + "/v1/batch", content=body, headers=headers, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Bearer realm="tzpush"'
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["instance"] == "/v1/batch"
