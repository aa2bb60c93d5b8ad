"""Issue 15, "Expo errors mean what Expo says", at the Expo adapter: ExpoSender against the fake
over real HTTP, the receipts poller, the alert metric and /healthz.

- ``MessageRateExceeded`` (a per-device throttle): that push alone is sent again after a back-off,
  until the deadline its caller gives; a push Expo accepted is never sent again.
- ``PUSH_TOO_MANY_EXPERIENCE_IDS``: the request is split by project as its ``details`` say.
- Project-level errors (``InvalidCredentials``, ``MismatchSenderId``, ``UNAUTHORIZED``), in a
  ticket, a receipt or a whole request: an event the metrics hook turns into the alert counter
  and a line in /healthz, which stays 200 (a restart cannot fix credentials).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from consumer.receipts import ReceiptPoller
from devstack.fake_expo import FakeExpo
from shared import metrics
from shared.domain.outcomes import ErrorCode
from shared.expo.pushes import OutgoingPush, PushOutcome
from shared.expo.sender import ExpoSender
from shared.store import db as dbm
from tests.integration.consumer_support import in_seconds
from tests.integration.expo_support import MakeFake
from tests.integration.harness import wait_for
from tests.integration.ops_helpers import free_port

pytestmark = pytest.mark.integration

RATE = "MessageRateExceeded"


class Events:
    """An on_event hook that keeps every event."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def __call__(self, name: str, fields: dict[str, Any]) -> None:
        with self.lock:
            self.seen.append((name, dict(fields)))

    def project_errors(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for name, fields in self.seen:
            if name == "project_error":
                out[str(fields["code"])] += int(fields["count"])
        return out


def tok(i: int) -> str:
    return f"ExponentPushToken[t{i}]"


def pushes(n: int) -> list[OutgoingPush]:
    return [
        OutgoingPush(f"m{i}", tok(i), "Lunch", "Time to eat", {"mid": f"m{i}"}) for i in range(n)
    ]


def delivered(fake: FakeExpo) -> Counter[str]:
    return Counter(p["data"]["mid"] for p in fake.pushes())


# -- MessageRateExceeded: back off and send that device's push again, within the deadline --------
def test_message_rate_exceeded_resends_only_that_push_after_a_back_off(
    make_fake: MakeFake, make_sender: Any
) -> None:
    fake = make_fake(ticket_errors={tok(1): [RATE, RATE]})
    sender = make_sender(fake.url, backoff_base_s=0.05, backoff_cap_s=0.1)
    marks: list[list[str]] = []
    chunks: list[list[PushOutcome]] = []
    outcomes = sender.send(pushes(3), on_chunk_done=chunks.append, before_request=marks.append)

    assert [o.ok for o in outcomes] == [True, True, True]
    assert delivered(fake) == Counter({"m0": 1, "m1": 1, "m2": 1})  # none twice
    assert fake.stats()["requests"] == 3  # the chunk, then m1 alone, twice
    assert fake.stats()["ticket_errors"] == {RATE: 2}
    assert [o.attempts for o in outcomes] == [1, 3, 1]
    # Each request that leaves is announced first (the caller's crash record), retries too.
    assert marks == [["m0", "m1", "m2"], ["m1"], ["m1"]]
    # Each outcome is handed over once, the throttled one when it is final.
    assert sorted(o.message_id for c in chunks for o in c) == ["m0", "m1", "m2"]


def test_message_rate_exceeded_past_the_deadline_fails_that_message_only(
    make_fake: MakeFake, make_sender: Any
) -> None:
    fake = make_fake(ticket_errors={tok(1): [RATE] * 100})
    sender = make_sender(fake.url, backoff_base_s=0.05, backoff_cap_s=0.1)
    started = time.monotonic()
    outcomes = sender.send(pushes(3), retry_within_s=0.6)
    elapsed = time.monotonic() - started

    assert [o.ok for o in outcomes] == [True, False, True]
    throttled = outcomes[1]
    assert throttled.code is ErrorCode.MESSAGE_RATE_EXCEEDED and throttled.error == RATE
    assert throttled.attempts > 1 and "retried" in throttled.message
    assert elapsed < 2.0, "retries are bounded by the deadline the caller gave"
    assert delivered(fake) == Counter({"m0": 1, "m2": 1})
    # No deadline left at all: not sent again.
    fake.configure(ticket_errors={tok(1): [RATE]})
    again = sender.send(pushes(2), retry_within_s=0)
    assert again[1].code is ErrorCode.MESSAGE_RATE_EXCEEDED and again[1].attempts == 1


# -- PUSH_TOO_MANY_EXPERIENCE_IDS: split by project as the details say ---------------------------
def test_too_many_experience_ids_splits_the_request_by_project(
    make_fake: MakeFake, make_sender: Any
) -> None:
    fake = make_fake(projects={tok(1): "@acme/b", tok(3): "@acme/b", tok(4): "@acme/c"})
    sender = make_sender(fake.url)
    marks: list[list[str]] = []
    outcomes = sender.send(pushes(6), before_request=marks.append)

    assert all(o.ok for o in outcomes), [o for o in outcomes if not o.ok]
    assert delivered(fake) == Counter({f"m{i}": 1 for i in range(6)})
    assert fake.stats()["http_errors"] == {"PUSH_TOO_MANY_EXPERIENCE_IDS": 1}
    assert fake.stats()["requests"] == 4  # the refused one, then one per project
    assert marks[0] == [f"m{i}" for i in range(6)]
    assert sorted(sorted(m) for m in marks[1:]) == [["m0", "m2", "m5"], ["m1", "m3"], ["m4"]]
    assert {o.attempts for o in outcomes} == {2}


# -- project-level errors: an alert, never a token -----------------------------------------------
def test_project_level_errors_raise_the_alert_event(make_fake: MakeFake, make_sender: Any) -> None:
    fake = make_fake(ticket_errors={tok(0): ["InvalidCredentials"], tok(1): ["MismatchSenderId"]})
    events = Events()
    outcomes = make_sender(fake.url, on_event=events).send(pushes(3))
    assert [o.code for o in outcomes] == [
        ErrorCode.INVALID_CREDENTIALS,
        ErrorCode.MISMATCH_SENDER_ID,
        None,
    ]
    assert events.project_errors() == {"InvalidCredentials": 1, "MismatchSenderId": 1}

    fake.configure(access_token="s3cret")  # push security on, and this sender has no token
    outcomes = make_sender(fake.url, on_event=events).send(pushes(2))
    assert {o.code for o in outcomes} == {ErrorCode.UNAUTHORIZED}
    assert events.project_errors()["UNAUTHORIZED"] == 2


@pytest.fixture
def alerts() -> Iterator[None]:
    metrics.EXPO_ALERTS.clear()
    yield
    metrics.EXPO_ALERTS.clear()


def test_healthz_and_metrics_say_so_and_stay_ready(
    make_fake: MakeFake, make_sender: Any, alerts: None
) -> None:
    fake = make_fake(ticket_errors={tok(0): ["InvalidCredentials"]})
    port = free_port()
    server = metrics.serve("127.0.0.1", port, lambda: {"database": None, "broker": None})
    assert server is not None
    url = f"http://127.0.0.1:{port}"
    try:
        healthy = requests.get(f"{url}/healthz", timeout=5)
        assert healthy.status_code == 200 and "alerts" not in healthy.json()
        make_sender(fake.url, on_event=metrics.expo_event).send(pushes(2))
        health = requests.get(f"{url}/healthz", timeout=5)
        # Still ready (a restart cannot fix credentials): it says so instead of failing.
        assert health.status_code == 200
        body = health.json()
        assert body["ok"] is True and body["problems"] == {}
        assert "InvalidCredentials" in body["alerts"]["expo"]
        assert "tokens untouched" in body["alerts"]["expo"]
        text = requests.get(f"{url}/metrics", timeout=5).text
        assert 'tzpush_expo_project_errors_total{code="InvalidCredentials"}' in text
    finally:
        server.shutdown()


# -- receipts: a project-level receipt error fails the message and leaves the token ---------------
def test_project_level_receipt_errors_alert_and_leave_the_token(world: Any) -> None:
    import datetime as dt

    t = world.user("creds")
    world.fake.configure(
        receipt_errors={
            t["token"]: ["InvalidCredentials", "MismatchSenderId", "InvalidCredentials"]
        }
    )
    p = world.planner()
    first = in_seconds(3)
    ids = []
    for k in range(3):
        due = first + dt.timedelta(seconds=k)
        ids += [d["_id"] for d in world.due_messages(["creds"], due, label=f"l{k}", planner=p)]
    world.start_consumer()
    wait_for(lambda: world.settled(ids), 20, what="all sent and merged")
    assert set(world.statuses(ids).values()) == {"success"}  # Expo took the tickets

    events = Events()
    sender = ExpoSender(world.settings.expo, on_event=events)
    try:
        counts = ReceiptPoller(world.settings, world.db, sender).poll_once()
    finally:
        sender.close()
    assert counts == {"error:InvalidCredentials": 2, "error:MismatchSenderId": 1}
    assert set(world.statuses(ids).values()) == {"failed"}
    doc = world.db[dbm.TOKENS].find_one({"_id": t["_id"]})
    assert doc["isActive"] is True and doc.get("failureCount", 0) == 0
    assert events.project_errors() == {"InvalidCredentials": 2, "MismatchSenderId": 1}
