"""Issue 34: `StompClient.connect` takes the first broker that answers, in order, and says so
when a reconnect lands on another broker than before (stomp.py replaced by a stand-in)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import stomp.exception

from shared import broker as broker_mod
from shared import metrics
from shared.errors import TransientError
from shared.settings import Settings

UP: set[tuple[str, int]] = set()


class FakeConnection:
    """Answers CONNECT only when its one endpoint is in ``UP``."""

    def __init__(self, hosts: list[tuple[str, int]], **_: Any) -> None:
        (self.endpoint,) = hosts
        self.up = False
        self.transport = None  # no socket to tune

    def set_listener(self, name: str, listener: Any) -> None:
        self.listener = listener

    def set_ssl(self, **_: Any) -> None:
        pass

    def connect(self, *_: Any, **__: Any) -> None:
        if self.endpoint not in UP:
            raise stomp.exception.ConnectFailedException()
        self.up = True

    def is_connected(self) -> bool:
        return self.up and self.endpoint in UP

    def disconnect(self) -> None:
        self.up = False


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> broker_mod.StompClient:
    monkeypatch.setattr(broker_mod.stomp, "Connection12", FakeConnection)
    monkeypatch.setattr(broker_mod, "_LAST_ENDPOINT", {})
    UP.clear()
    settings = Settings.load(stomp={"endpoints": "127.0.0.1:7001,127.0.0.1:7002"})
    return broker_mod.StompClient(settings)


def test_connect_takes_the_first_endpoint_that_answers(client: broker_mod.StompClient) -> None:
    UP.update({("127.0.0.1", 7001), ("127.0.0.1", 7002)})
    assert client.connect().endpoint == ("127.0.0.1", 7001)
    UP.discard(("127.0.0.1", 7001))
    assert client.connect().endpoint == ("127.0.0.1", 7002)


def test_a_reconnect_to_the_other_broker_is_logged_and_counted(
    client: broker_mod.StompClient, caplog: pytest.LogCaptureFixture
) -> None:
    UP.add(("127.0.0.1", 7001))
    client.connect()
    before = metrics.BROKER_FAILOVERS._value.get()
    UP.clear()
    UP.add(("127.0.0.1", 7002))
    assert not client.connected
    with caplog.at_level(logging.WARNING, logger="shared.broker"):
        client.connect()
    assert metrics.BROKER_FAILOVERS._value.get() == before + 1
    assert metrics.BROKER_ENDPOINT._value.get() == 1
    assert "broker failover: connected to 127.0.0.1:7002 (endpoint 2 of 2), was 127.0.0.1:7001" in (
        caplog.text
    )


def test_a_new_client_after_a_loss_still_says_it_failed_over(
    client: broker_mod.StompClient, caplog: pytest.LogCaptureFixture
) -> None:
    UP.add(("127.0.0.1", 7001))
    client.connect()
    UP.clear()
    UP.add(("127.0.0.1", 7002))
    again = broker_mod.StompClient(client.settings)  # what a consumer does on each reconnect
    with caplog.at_level(logging.WARNING, logger="shared.broker"):
        again.connect()
    assert "broker failover: connected to 127.0.0.1:7002" in caplog.text


def test_no_broker_answering_is_a_transient_error_naming_each(
    client: broker_mod.StompClient,
) -> None:
    with pytest.raises(TransientError, match="any of the brokers") as caught:
        client.connect()
    assert "127.0.0.1:7001" in str(caught.value) and "127.0.0.1:7002" in str(caught.value)
