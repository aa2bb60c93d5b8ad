"""The local Expo fake, over real HTTP, driven by exponent-server-sdk's own PushClient.

If the SDK is happy with the fake, our sender (which builds on the SDK) sees Expo's wire format.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from exponent_server_sdk import (
    DeviceNotRegisteredError,
    MessageTooBigError,
    PushClient,
    PushMessage,
    PushServerError,
)

from devstack.fake_expo import FakeExpo
from shared.domain.validation import MAX_PAYLOAD_BYTES, payload_size

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "ExponentPushToken[aaaaaaaaaaaaaaaaaaaaaa]"

MakeFake = Callable[..., FakeExpo]


@pytest.fixture
def make_fake() -> Iterator[MakeFake]:
    started: list[FakeExpo] = []

    def make(**kwargs: Any) -> FakeExpo:
        kwargs.setdefault("receipt_delay_s", 0.0)
        fake = FakeExpo(port=0, **kwargs).start()
        started.append(fake)
        return fake

    yield make
    for fake in started:
        fake.stop()


@pytest.fixture
def fake(make_fake: MakeFake) -> FakeExpo:
    return make_fake(rate_per_second=0)


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def test_ok_tickets_in_order_and_pushes_recorded(fake: FakeExpo) -> None:
    client = PushClient(host=fake.url)
    before_ms = int(time.time() * 1000)
    messages = [PushMessage(to=TOKEN, title=f"t{i}", body="b", data={"i": i}) for i in range(3)]
    tickets = client.publish_multiple(messages)
    assert [t.status for t in tickets] == ["ok"] * 3
    assert len({t.id for t in tickets}) == 3
    pushes = fake.pushes()
    assert [p["title"] for p in pushes] == ["t0", "t1", "t2"]
    assert [p["ticket_id"] for p in pushes] == [t.id for t in tickets]
    assert pushes[0]["data"] == {"i": 0} and pushes[0]["to"] == TOKEN
    assert before_ms <= pushes[0]["received_at_ms"] <= int(time.time() * 1000)
    # the HTTP view of the same record, with since_ms
    remote = requests.get(f"{fake.url}/_fake/pushes", params={"since_ms": before_ms}).json()
    assert remote == pushes
    assert requests.get(f"{fake.url}/_fake/pushes", params={"since_ms": 2**62}).json() == []


def test_single_message_object_and_other_token_formats(fake: FakeExpo) -> None:
    for to in ("ExpoPushToken[abc]", "0f9e2b0c-1111-2222-3333-444455556666"):
        reply = requests.post(f"{fake.url}/--/api/v2/push/send", json={"to": to, "body": "x"})
        assert reply.status_code == 200
        assert reply.json()["data"][0]["status"] == "ok"
    assert [p["to"] for p in fake.pushes()][-1].endswith("6666")


def test_device_not_registered_ticket(make_fake: MakeFake) -> None:
    fake = make_fake(rate_per_second=0, dead_at_ticket=["ExponentPushToken[gone]"])
    client = PushClient(host=fake.url)
    tickets = client.publish_multiple(
        [
            PushMessage(to=TOKEN),
            PushMessage(to="ExponentPushToken[gone]"),
            PushMessage(to="ExponentPushToken[x-dead-ticket-1]"),
        ]
    )
    assert tickets[0].is_success()
    for ticket in tickets[1:]:
        with pytest.raises(DeviceNotRegisteredError):
            ticket.validate_response()
        assert ticket.details["expoPushToken"] == ticket.push_message.to
    assert len(fake.pushes()) == 1
    assert fake.stats()["ticket_errors"] == {"DeviceNotRegistered": 2}


def test_malformed_token_gets_a_device_not_registered_ticket(fake: FakeExpo) -> None:
    reply = requests.post(f"{fake.url}/--/api/v2/push/send", json=[{"to": "abc"}, {"to": TOKEN}])
    data = reply.json()["data"]
    assert data[0]["status"] == "error"
    assert data[0]["details"]["error"] == "DeviceNotRegistered"
    assert data[0]["message"] == '"abc" is not a registered push notification recipient'
    assert data[1]["status"] == "ok"


def test_missing_to_is_a_validation_error(fake: FakeExpo) -> None:
    reply = requests.post(f"{fake.url}/--/api/v2/push/send", json=[{"title": "no to"}])
    assert reply.status_code == 400
    assert reply.json()["errors"][0]["code"] == "VALIDATION_ERROR"
    reply = requests.post(f"{fake.url}/--/api/v2/push/send", data=b"{not json")
    assert reply.status_code == 400


def test_429_above_the_rate(make_fake: MakeFake) -> None:
    fake = make_fake(rate_per_second=150)  # bucket of 150, refilled at 150/s
    client = PushClient(host=fake.url)
    batch = [PushMessage(to=TOKEN)] * 100
    assert len(client.publish_multiple(batch)) == 100
    with pytest.raises(PushServerError) as info:
        client.publish_multiple(batch)
    assert info.value.response.status_code == 429
    assert info.value.errors[0]["code"] == "TOO_MANY_REQUESTS"
    assert info.value.errors[0]["message"].startswith("Exceeded 150 notifications per second")
    assert fake.stats()["http_429"] == 1
    assert len(fake.pushes()) == 100  # a refused request records nothing

    def passes() -> bool:
        try:
            client.publish_multiple(batch)
        except PushServerError:
            time.sleep(0.05)
            return False
        return True

    assert wait_for(passes, timeout=3)  # ~0.33 s of refill later


def test_rate_zero_is_unlimited(fake: FakeExpo) -> None:
    client = PushClient(host=fake.url)
    for _ in range(20):
        client.publish_multiple([PushMessage(to=TOKEN)] * 100)
    assert fake.stats()["pushes_accepted"] == 2000


def test_receipts_only_after_the_delay(make_fake: MakeFake) -> None:
    fake = make_fake(rate_per_second=0, receipt_delay_s=0.4)
    client = PushClient(host=fake.url)
    tickets = client.publish_multiple(
        [PushMessage(to=TOKEN), PushMessage(to="ExponentPushToken[a-dead-receipt]")]
    )
    assert all(t.is_success() for t in tickets)  # dead only at receipt time
    assert client.check_receipts_multiple(tickets) == []
    receipts = wait_for(lambda: client.check_receipts_multiple(tickets), timeout=5)
    by_id = {r.id: r for r in receipts}
    assert set(by_id) == {t.id for t in tickets}
    by_id[tickets[0].id].validate_response()
    with pytest.raises(DeviceNotRegisteredError):
        by_id[tickets[1].id].validate_response()


def test_unknown_receipt_ids_are_absent(fake: FakeExpo) -> None:
    client = PushClient(host=fake.url)
    ticket = client.publish(PushMessage(to=TOKEN))
    reply = requests.post(
        f"{fake.url}/--/api/v2/push/getReceipts", json={"ids": [ticket.id, "nope"]}
    )
    assert reply.json() == {"data": {ticket.id: {"status": "ok"}}}


def test_401_without_the_token(make_fake: MakeFake) -> None:
    fake = make_fake(rate_per_second=0, access_token="s3cret")
    with pytest.raises(PushServerError) as info:
        PushClient(host=fake.url).publish(PushMessage(to=TOKEN))
    assert info.value.response.status_code == 401
    assert info.value.errors[0]["code"] == "UNAUTHORIZED"

    session = requests.Session()
    session.headers.update({"content-type": "application/json", "Authorization": "Bearer wrong"})
    with pytest.raises(PushServerError):
        PushClient(host=fake.url, session=session).publish(PushMessage(to=TOKEN))

    session.headers["Authorization"] = "Bearer s3cret"
    client = PushClient(host=fake.url, session=session)
    ticket = client.publish(PushMessage(to=TOKEN))
    assert ticket.is_success()
    assert len(client.check_receipts_multiple([ticket])) == 1
    # The SDK trap: check_receipts() ignores the session, so the header is lost.
    with pytest.raises(PushServerError) as info:
        client.check_receipts([ticket])
    assert info.value.response.status_code == 401
    # the fake's own endpoints never need the token
    assert requests.get(f"{fake.url}/_fake/stats").json()["http_errors"]["UNAUTHORIZED"] == 3


def test_more_than_100_messages_is_refused(fake: FakeExpo) -> None:
    client = PushClient(host=fake.url, max_message_count=101)
    with pytest.raises(PushServerError) as info:
        client.publish_multiple([PushMessage(to=TOKEN)] * 101)
    assert info.value.response.status_code == 400
    assert info.value.errors[0]["code"] == "PUSH_TOO_MANY_NOTIFICATIONS"
    assert fake.pushes() == []
    # a list in "to" counts each recipient
    reply = requests.post(
        f"{fake.url}/--/api/v2/push/send", json=[{"to": [TOKEN] * 60}, {"to": [TOKEN] * 41}]
    )
    assert reply.json()["errors"][0]["code"] == "PUSH_TOO_MANY_NOTIFICATIONS"
    reply = requests.post(f"{fake.url}/--/api/v2/push/send", json={"to": [TOKEN] * 3})
    assert len(reply.json()["data"]) == 3


def test_more_than_1000_receipt_ids_is_refused(fake: FakeExpo) -> None:
    client = PushClient(host=fake.url, max_receipt_count=1001)
    refs = [type("T", (), {"id": str(i)})() for i in range(1001)]
    with pytest.raises(PushServerError) as info:
        client.check_receipts_multiple(refs)
    assert info.value.response.status_code == 400
    assert info.value.errors[0]["code"] == "PUSH_TOO_MANY_RECEIPTS"
    assert PushClient(host=fake.url).check_receipts_multiple(refs) == []  # 1000 + 1: fine


def test_4_kib_limit(fake: FakeExpo) -> None:
    client = PushClient(host=fake.url)
    overhead = payload_size({"to": TOKEN, "body": ""})
    at_limit = PushMessage(to=TOKEN, body="x" * (MAX_PAYLOAD_BYTES - overhead))
    over = PushMessage(to=TOKEN, body="x" * (MAX_PAYLOAD_BYTES - overhead + 1))
    assert payload_size(at_limit.get_payload()) == MAX_PAYLOAD_BYTES
    tickets = client.publish_multiple([at_limit, over])
    assert tickets[0].is_success()
    with pytest.raises(MessageTooBigError):
        tickets[1].validate_response()
    assert len(fake.pushes()) == 1


def test_gzip_request_body(fake: FakeExpo) -> None:
    body = gzip.compress(json.dumps([{"to": TOKEN, "body": "z" * 2000}] * 10).encode())
    reply = requests.post(
        f"{fake.url}/--/api/v2/push/send",
        data=body,
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert reply.status_code == 200 and len(reply.json()["data"]) == 10
    reply = requests.post(
        f"{fake.url}/--/api/v2/push/send", data=b"not gzip", headers={"Content-Encoding": "gzip"}
    )
    assert reply.status_code == 400


def test_injected_5xx_are_500_json_or_502_html(make_fake: MakeFake) -> None:
    fake = make_fake(rate_per_second=0, error_rate=1.0, seed=1)
    client = PushClient(host=fake.url)
    seen: set[str] = set()
    for _ in range(20):
        try:
            client.publish(PushMessage(to=TOKEN))
        except PushServerError as exc:
            assert exc.response.status_code == 500
            assert exc.errors[0]["code"] == "INTERNAL_SERVER_ERROR"
            seen.add("500")
        except requests.HTTPError as exc:  # non-JSON body: the SDK raises raise_for_status()
            assert exc.response is not None and exc.response.status_code == 502
            assert "<html>" in exc.response.text
            seen.add("502")
    assert seen == {"500", "502"}
    assert fake.pushes() == []
    errors = fake.stats()["http_errors"]
    assert errors["INTERNAL_SERVER_ERROR"] + errors["BAD_GATEWAY"] == 20


def test_latency(make_fake: MakeFake) -> None:
    fake = make_fake(rate_per_second=0, latency_ms=200)
    started = time.monotonic()
    PushClient(host=fake.url).publish(PushMessage(to=TOKEN))
    assert time.monotonic() - started >= 0.2


def test_config_over_http_and_python(fake: FakeExpo) -> None:
    url = f"{fake.url}/_fake/config"
    reply = requests.post(
        url,
        json={"error_rate": 1.0, "dead_at_receipt": ["ExpoPushToken[r]"], "rate_per_second": 5},
    )
    assert reply.status_code == 200
    assert reply.json()["error_rate"] == 1.0 and fake.error_rate == 1.0
    assert fake.dead_at_receipt == {"ExpoPushToken[r]"} and fake.rate_per_second == 5
    assert requests.get(url).json()["dead_at_receipt"] == ["ExpoPushToken[r]"]
    assert requests.post(url, json={"nonsense": 1}).status_code == 400
    assert requests.post(url, json={"error_rate": 2}).status_code == 400
    fake.configure(error_rate=0, rate_per_second=0)
    assert PushClient(host=fake.url).publish(PushMessage(to=TOKEN)).is_success()


def test_stats_clear_and_healthz(fake: FakeExpo) -> None:
    PushClient(host=fake.url).publish(PushMessage(to=TOKEN))
    stats = requests.get(f"{fake.url}/_fake/stats").json()
    assert stats["requests"] == 1 and stats["pushes_accepted"] == 1 and stats["http_429"] == 0
    assert requests.delete(f"{fake.url}/_fake/pushes").status_code == 200
    assert fake.pushes() == [] and fake.stats()["pushes_accepted"] == 0
    assert requests.get(f"{fake.url}/healthz").status_code == 200
    assert requests.get(f"{fake.url}/nope").status_code == 404


def test_keep_alive_reuses_one_connection(fake: FakeExpo) -> None:
    client = PushClient(host=fake.url)
    for _ in range(10):
        client.publish(PushMessage(to=TOKEN))
    assert fake._server is not None
    assert len(fake._server.connections) == 1


def test_cli_runs_until_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "TZPUSH_EXPO__ACCESS_TOKEN": "cli-token"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ops.cli", "fake-expo", "--port", "0", "--rate", "0"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "fake Expo listening on http://" in line, line + proc.stderr.read()
        assert "bearer token required" in line
        url = line.split(" on ")[1].split(" ")[0]
        assert requests.get(f"{url}/healthz", timeout=5).status_code == 200
        denied = requests.post(f"{url}/--/api/v2/push/send", json={"to": TOKEN}, timeout=5)
        assert denied.status_code == 401
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "fake Expo stopped" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_send_accepted_then_hanging_is_recorded_though_the_client_times_out(
    fake: FakeExpo,
) -> None:
    fake.configure(hang_after_accept_s=3.0)
    body = json.dumps([{"to": TOKEN, "title": "late answer"}])
    url = fake.url + "/--/api/v2/push/send"
    with pytest.raises(requests.Timeout):
        requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=0.5)
    assert [p["title"] for p in fake.pushes()] == ["late answer"]
    assert fake.config()["hang_after_accept_s"] == 3.0
    fake.configure(hang_after_accept_s=0)
    answer = requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=2)
    assert answer.status_code == 200
