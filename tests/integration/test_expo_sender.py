"""ExpoSender against the local fake over real HTTP: chunking, throttling, retries, receipts."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from devstack.fake_expo import FakeExpo
from shared.domain.outcomes import ErrorCode
from shared.errors import PermanentError, TransientError
from shared.expo.pushes import OutgoingPush, PushOutcome
from shared.expo.sender import ExpoSender
from shared.settings import ExpoSettings
from tests.integration.expo_support import Events, MakeFake

pytestmark = pytest.mark.integration


def pushes(n: int, prefix: str = "m", token: str = "ExponentPushToken[t{i}]") -> list[OutgoingPush]:
    return [
        OutgoingPush(
            f"{prefix}{i}", token.format(i=i), "Lunch", "Time to eat", {"mid": f"{prefix}{i}"}
        )
        for i in range(n)
    ]


def delivered(fake: FakeExpo) -> Counter[str]:
    return Counter(p["data"]["mid"] for p in fake.pushes())


def test_chunks_of_100_in_parallel_with_on_chunk_done(
    make_fake: MakeFake, make_sender: Any
) -> None:
    fake = make_fake(latency_ms=300)
    sender = make_sender(fake.url, concurrency=4)
    chunks: list[list[PushOutcome]] = []
    started = time.monotonic()
    outcomes = sender.send(pushes(450), on_chunk_done=chunks.append)
    elapsed = time.monotonic() - started
    assert [o.message_id for o in outcomes] == [f"m{i}" for i in range(450)]
    assert all(o.ok and o.ticket_id and o.attempts == 1 for o in outcomes)
    assert sorted(len(c) for c in chunks) == [50, 100, 100, 100, 100]
    assert fake.stats()["requests"] == 5
    assert elapsed < 1.2, "5 requests of 300 ms, 4 at a time: ~0.6 s, serial would be 1.5 s"
    recorded = {p["ticket_id"]: p for p in fake.pushes()}
    assert {o.ticket_id for o in outcomes} == set(recorded)
    assert delivered(fake) == Counter({f"m{i}": 1 for i in range(450)})


def test_expo_and_uuid_tokens_get_through_the_sdk(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake()
    tokens = ["ExpoPushToken[abc]", "0f9e2b0c-1111-2222-3333-444455556666", "ExponentPushToken[x]"]
    batch = [
        OutgoingPush(
            f"m{i}", t, "t", None, None, category="meal", ttl=60, priority="high", sound="default"
        )
        for i, t in enumerate(tokens)
    ]
    outcomes = make_sender(fake.url).send(batch)
    assert all(o.ok for o in outcomes)
    assert [p["to"] for p in fake.pushes()] == tokens


def test_limiter_gives_zero_429s_at_the_services_rate(
    make_fake: MakeFake, make_sender: Any
) -> None:
    fake = make_fake(rate_per_second=600)
    events = Events()
    sender = make_sender(fake.url, rate_per_second=600.0, concurrency=4, on_event=events)
    started = time.monotonic()
    outcomes = sender.send(pushes(2000))
    elapsed = time.monotonic() - started
    assert all(o.ok for o in outcomes)
    assert fake.stats()["http_429"] == 0 and events.counts["http_429"] == 0
    assert events.counts["retry"] == 0
    # (2000 - one burst of 100) / 600 = 3.2 s; the limit is what makes it take that long
    assert 2.8 <= elapsed <= 2000 / 600 + 1.5


@pytest.mark.skipif(not os.environ.get("TZPUSH_SLOW"), reason="17 s; set TZPUSH_SLOW=1")
def test_thundering_herd_of_10k_at_600_per_second(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake(rate_per_second=600)
    sender = make_sender(fake.url, rate_per_second=600.0, concurrency=8)
    started = time.monotonic()
    outcomes = sender.send(pushes(10_000))
    elapsed = time.monotonic() - started
    assert all(o.ok for o in outcomes)
    assert fake.stats()["http_429"] == 0
    assert elapsed <= 10_000 / 600 + 1.5


def test_retries_ride_out_30_percent_5xx(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake(error_rate=0.3, seed=7)
    events = Events()
    sender = make_sender(
        fake.url, max_retries=10, backoff_base_s=0.02, backoff_cap_s=0.2, on_event=events
    )
    outcomes = sender.send(pushes(1000))
    assert all(o.ok for o in outcomes), [o for o in outcomes if not o.ok][:3]
    assert set(delivered(fake)) == {f"m{i}" for i in range(1000)}  # none lost
    errors = fake.stats()["http_errors"]
    injected = errors.get("INTERNAL_SERVER_ERROR", 0) + errors.get("BAD_GATEWAY", 0)
    assert injected > 0 and events.counts["retry"] == injected
    assert max(o.attempts for o in outcomes) > 1


def test_429_storm_is_ridden_out(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake(rate_per_second=100)  # the service allows 100/s...
    events = Events()
    sender = make_sender(  # ...but this client was told 1000/s
        fake.url,
        rate_per_second=1000.0,
        max_retries=20,
        backoff_base_s=0.1,
        backoff_cap_s=1.0,
        on_event=events,
    )
    outcomes = sender.send(pushes(300))
    assert all(o.ok for o in outcomes), [o for o in outcomes if not o.ok][:3]
    assert delivered(fake) == Counter({f"m{i}": 1 for i in range(300)})  # none lost, none twice
    assert fake.stats()["http_429"] > 0
    assert events.counts["http_429"] == fake.stats()["http_429"]


def test_device_not_registered_outcome(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake(dead_at_ticket=["ExponentPushToken[gone]"])
    batch = [
        *pushes(2),
        OutgoingPush("dead1", "ExponentPushToken[gone]", "t", "b", None),
        OutgoingPush("dead2", "ExpoPushToken[dead-ticket-7]", "t", "b", None),
    ]
    outcomes = make_sender(fake.url).send(batch)
    assert [o.ok for o in outcomes] == [True, True, False, False]
    for outcome in outcomes[2:]:
        assert outcome.device_not_registered and outcome.error == "DeviceNotRegistered"
        assert "not a registered push notification recipient" in outcome.message
        assert outcome.ticket_id is None


def test_bad_token_and_big_payload_are_refused_before_sending(
    make_fake: MakeFake, make_sender: Any
) -> None:
    fake = make_fake()
    chunks: list[list[PushOutcome]] = []
    batch = [
        OutgoingPush("bad", "abc", "t", "b", None),
        OutgoingPush("big", "ExponentPushToken[a]", "t", "x" * 5000, None),
        *pushes(1),
    ]
    outcomes = make_sender(fake.url).send(batch, on_chunk_done=chunks.append)
    assert outcomes[0].error == "InvalidToken" and "'abc'" in outcomes[0].message
    assert outcomes[1].error == "MessageTooBig" and "bytes" in outcomes[1].message
    assert outcomes[0].attempts == outcomes[1].attempts == 0
    assert outcomes[2].ok
    assert [[o.message_id for o in chunk] for chunk in chunks] == [["bad", "big", "m0"]]
    assert len(fake.pushes()) == 1


def test_receipts_after_the_delay_including_a_dead_device(
    make_fake: MakeFake, make_sender: Any
) -> None:
    fake = make_fake(receipt_delay_s=0.5, dead_at_receipt=["ExponentPushToken[late]"])
    sender = make_sender(fake.url)
    batch = [*pushes(3), OutgoingPush("late", "ExponentPushToken[late]", "t", "b", None)]
    outcomes = sender.send(batch)
    ids = [o.ticket_id for o in outcomes if o.ticket_id]
    assert len(ids) == 4
    assert sender.get_receipts(ids) == {}  # not ready: absent
    deadline = time.monotonic() + 5
    receipts = {}
    while len(receipts) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
        receipts = sender.get_receipts(ids)
    assert set(receipts) == set(ids)
    dead = receipts[outcomes[3].ticket_id or ""]
    assert not dead.ok and dead.device_not_registered and "registered" in dead.message
    assert all(receipts[i].ok for i in ids[:3])


def test_receipts_are_fetched_in_chunks_of_1000(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake()
    sender = make_sender(fake.url)
    outcomes = sender.send(pushes(5))
    ids = [o.ticket_id or "" for o in outcomes] + [f"unknown-{i}" for i in range(2400)]
    before = fake.stats()["requests"]
    receipts = sender.get_receipts(ids)
    assert set(receipts) == {o.ticket_id for o in outcomes}
    assert fake.stats()["requests"] - before == 3


def test_401_is_not_retried_and_fails_every_push(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake(access_token="s3cret")
    events = Events()
    outcomes = make_sender(fake.url, on_event=events).send(pushes(150))
    assert {o.error for o in outcomes} == {"UNAUTHORIZED"}
    assert all(o.attempts == 1 and not o.ok for o in outcomes)
    assert "401" in outcomes[0].message
    assert events.counts["retry"] == 0 and events.counts["chunk_failed"] == 2
    with pytest.raises(PermanentError):
        make_sender(fake.url).get_receipts(["x"])
    # with the token it goes
    good = make_sender(fake.url, access_token="s3cret")
    assert all(o.ok for o in good.send(pushes(3)))
    assert good.get_receipts([]) == {}


def test_exhausted_retries_name_the_reason(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake(error_rate=1.0, seed=3)
    sender = make_sender(fake.url, max_retries=2, backoff_base_s=0.01, backoff_cap_s=0.02)
    outcomes = sender.send(pushes(3))
    assert all(not o.ok and o.attempts == 3 for o in outcomes)
    assert outcomes[0].error in {"HTTP 500 after 2 retries", "HTTP 502 after 2 retries"}
    fake.configure(error_rate=0, rate_per_second=1)  # a bucket of 100 that refills slowly
    assert all(o.ok for o in sender.send(pushes(100)))
    outcomes = sender.send(pushes(100))
    assert {o.error for o in outcomes} == {"TOO_MANY_REQUESTS after 2 retries"}


def test_network_errors_are_retried_then_reported(make_sender: Any) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    events = Events()
    sender = make_sender(
        f"http://127.0.0.1:{port}",
        max_retries=2,
        backoff_base_s=0.01,
        backoff_cap_s=0.02,
        on_event=events,
    )
    outcomes = sender.send(pushes(2))
    assert outcomes[0].error == "network error (ConnectionError) after 2 retries"
    assert events.counts["retry"] == 2


def test_failing_callback_stops_later_chunks(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake()
    sender = make_sender(fake.url, concurrency=1)

    def explode(chunk: list[PushOutcome]) -> None:
        raise RuntimeError("database down")

    with pytest.raises(RuntimeError, match="database down"):
        sender.send(pushes(500), on_chunk_done=explode)
    assert len(fake.pushes()) < 500


def test_gzip_bodies_are_sent_and_accepted(make_fake: MakeFake) -> None:
    fake = make_fake()
    settings = ExpoSettings(base_url=fake.url, rate_per_second=100_000.0)
    with ExpoSender(settings, gzip_min_bytes=0) as sender:
        assert all(o.ok for o in sender.send(pushes(120)))
        assert sender.get_receipts([]) == {}
    assert len(fake.pushes()) == 120
    assert fake.stats()["gzip_requests"] == 2
    with ExpoSender(settings, gzip_min_bytes=None) as sender:
        assert all(o.ok for o in sender.send(pushes(10)))
    assert fake.stats()["gzip_requests"] == 2


# -- the resend policy (issue 14): resend only what Expo certainly did not accept ----------------
def test_a_read_timeout_is_not_resent_its_outcome_is_unknown(
    make_fake: MakeFake, make_sender: Any
) -> None:
    """The fake takes the chunk (after its latency) although the client gave up waiting: a
    resend would push it again. The pushes end failed, outcome unknown, sent once."""
    fake = make_fake(latency_ms=1500)
    sender = make_sender(fake.url, timeout_s=0.5, max_retries=2, backoff_base_s=0.01)
    outcomes = sender.send(pushes(5))
    # The fake counts a request when it arrives: once send() returns, every try has arrived.
    assert fake.stats()["requests"] == 1, "an unanswered chunk was sent again"
    wait_until = time.monotonic() + 10
    while len(fake.pushes()) < 5 and time.monotonic() < wait_until:
        time.sleep(0.1)  # the fake finishes the request the client stopped waiting for
    assert delivered(fake) == Counter({f"m{i}": 1 for i in range(5)})
    assert all(not o.ok and o.attempts == 1 for o in outcomes)
    assert outcomes[0].code is ErrorCode.OUTCOME_UNKNOWN
    assert "outcome unknown" in outcomes[0].message and "ReadTimeout" in outcomes[0].error


def test_an_unreadable_2xx_is_not_resent_its_outcome_is_unknown(make_sender: Any) -> None:
    """Expo answered 200 (it accepted the chunk) with a body nobody can read."""
    hits: list[bytes] = []

    class Garbled(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hits.append(self.rfile.read(int(self.headers["Content-Length"])))
            body = b"<html>not json</html>"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Garbled)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        outcomes = make_sender(url, max_retries=2, backoff_base_s=0.01).send(pushes(3))
    finally:
        server.shutdown()
    assert len(hits) == 1, f"{len(hits)} requests: an accepted chunk was sent again"
    assert all(not o.ok and o.code is ErrorCode.OUTCOME_UNKNOWN for o in outcomes)


def test_a_receipts_read_timeout_is_asked_again(make_fake: MakeFake, make_sender: Any) -> None:
    """Asking for receipts twice changes nothing at Expo: a lost answer is asked for again, and
    what is still missing after the retries is a passing failure (poll later), not permanent."""
    fake = make_fake()
    sender = make_sender(fake.url, timeout_s=0.5, max_retries=2, backoff_base_s=0.01)
    ids = [o.ticket_id or "" for o in sender.send(pushes(3))]
    fake.configure(latency_ms=800)
    before = fake.stats()["requests"]
    with pytest.raises(TransientError):
        sender.get_receipts(ids)
    assert fake.stats()["requests"] - before == 3
