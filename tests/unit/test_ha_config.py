"""Issue 34: the broker endpoints in order, the local pair, the write concern of what
exactly-once rests on, and the database topology `tzpush doctor` reports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devstack.config import ServiceError, StackConfig
from ops.doctor_topology import judge
from shared.settings import Settings, SettingsError
from shared.store import db as dbm


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("TZPUSH_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


def test_one_host_stays_the_only_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZPUSH_STOMP__HOST", "127.0.0.2")
    monkeypatch.setenv("TZPUSH_STOMP__PORT", "61700")
    assert Settings.load().stomp.addresses() == [("127.0.0.2", 61700)]


def test_endpoints_are_tried_in_the_order_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZPUSH_STOMP__ENDPOINTS", "127.0.0.1:61614, [::1]:61613")
    assert Settings.load().stomp.addresses() == [("127.0.0.1", 61614), ("::1", 61613)]


@pytest.mark.parametrize("bad", ["127.0.0.1", "127.0.0.1:0", "h:1,h:x", ":61613", "a:1,a:1"])
def test_a_bad_endpoint_list_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("TZPUSH_STOMP__ENDPOINTS", bad)
    with pytest.raises(SettingsError, match="TZPUSH_STOMP__ENDPOINTS"):
        Settings.load()


def test_an_endpoint_off_loopback_needs_a_signing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZPUSH_STOMP__ENDPOINTS", "127.0.0.1:61613,b-2.mq.example.com:61614")
    with pytest.raises(SettingsError, match=r"b-2\.mq\.example\.com"):
        Settings.load()
    monkeypatch.setenv("TZPUSH_STOMP__SIGNING_KEY", "k" * 32)
    assert len(Settings.load().stomp.addresses()) == 2


def test_two_loopback_endpoints_make_the_local_pair() -> None:
    s = Settings.load(stomp={"endpoints": "127.0.0.1:57000,127.0.0.1:57005"})
    config = StackConfig.from_settings(s)
    assert (config.stomp_port, config.stomp_port_b) == (57000, 57005)
    assert config.brokers == ("activemq", "activemq-b")
    assert StackConfig.from_settings(Settings.load()).brokers == ("activemq",)


def test_the_local_stack_refuses_three_brokers_or_two_hosts() -> None:
    for endpoints in ("127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "127.0.0.1:1,127.0.0.2:2"):
        with pytest.raises(ServiceError, match="one broker or one pair"):
            StackConfig.from_settings(Settings.load(stomp={"endpoints": endpoints}))


def test_guards_are_written_with_majority_unless_told_otherwise() -> None:
    database = dbm.connect(Settings.load().mongo)  # no I/O until the first command
    try:
        coll = dbm.critical(database, dbm.SENDS)
        assert coll.write_concern.document == {"w": "majority"}
        assert coll.read_preference.mode == 0  # primary
    finally:
        database.client.close()
    database = dbm.connect(Settings.load(mongo={"write_concern": "1"}).mongo)
    try:
        assert dbm.critical(database, dbm.JOURNAL).write_concern.document == {"w": 1}
    finally:
        database.client.close()


def test_a_write_concern_that_is_not_majority_or_a_count_is_refused() -> None:
    with pytest.raises(SettingsError, match="TZPUSH_MONGO__WRITE_CONCERN"):
        Settings.load(mongo={"write_concern": "all"})


RS = {"setName": "rs0", "hosts": ["a:27017", "b:27017", "c:27017"]}


def test_doctor_warns_where_a_rollback_could_lose_a_guard() -> None:
    row = judge(RS, "w:1", "1")
    assert row.status == "warn" and "roll back" in row.detail
    assert "TZPUSH_MONGO__WRITE_CONCERN=majority" in row.fix


def test_doctor_accepts_a_replica_set_written_with_majority() -> None:
    row = judge(RS, "w:majority", "majority")
    assert row.status == "ok"
    assert "replica set 'rs0' (3 members)" in row.detail and "w:majority" in row.detail


def test_doctor_names_a_standalone_server_and_its_single_copy() -> None:
    row = judge({"isWritablePrimary": True}, None, "majority")
    assert row.status == "warn" and row.detail.startswith("standalone")
