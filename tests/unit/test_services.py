"""Pure parts of devstack/ (config, stack): which addresses the local stack accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.config import ServiceError, StackConfig, is_loopback, parse_mongo_host
from shared.settings import Settings


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("mongodb://127.0.0.1:27017/?directConnection=true", ("127.0.0.1", 27017)),
        ("mongodb://localhost/tzpush", ("localhost", 27017)),
        ("mongodb://user:p%40ss@127.0.0.1:27027/?authSource=admin", ("127.0.0.1", 27027)),
        ("mongodb://[::1]:27030", ("::1", 27030)),
    ],
)
def test_parse_mongo_host_accepts_one_loopback_host(uri: str, expected: tuple[str, int]) -> None:
    assert parse_mongo_host(uri) == expected


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("mongodb+srv://cluster0.example.net/", "mongodb://"),
        ("mongodb://db.example.net:27017/", "loopback"),
        ("mongodb://127.0.0.1:1,127.0.0.1:2/", "several hosts"),
        ("mongodb://127.0.0.1:x/", "bad port"),
    ],
)
def test_parse_mongo_host_refuses_with_a_reason(uri: str, words: str) -> None:
    with pytest.raises(ServiceError, match=words):
        parse_mongo_host(uri)


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")


def test_config_from_settings(tmp_path: Path) -> None:
    settings = Settings.load(
        mongo={"uri": "mongodb://127.0.0.1:27999/"},
        stomp={"port": 61999, "login": "amq", "passcode": "secret"},
        local={"state_dir": str(tmp_path)},
    )
    config = StackConfig.from_settings(settings)
    assert (config.mongo_port, config.stomp_port) == (27999, 61999)
    assert config.stomp_passcode == "secret"
    assert config.secantus_venv == tmp_path / "secantus-venv"


def test_config_refuses_remote_broker(tmp_path: Path) -> None:
    # Valid settings for a remote broker (a remote broker needs a wake-up signing key).
    remote = {"host": "b-1.mq.eu-west-1.amazonaws.com", "signing_key": "0123456789abcdef" * 2}
    settings = Settings.load(stomp=remote)
    with pytest.raises(ServiceError, match="TZPUSH_STOMP__HOST"):
        StackConfig.from_settings(settings)


def test_the_fake_expo_command_passes_its_options_to_fake_expo_by_name() -> None:
    """Every option the command hands on is a keyword argument of ``FakeExpo`` and a parsed
    option of the command (``--rate`` and ``--receipt-delay`` parse into the fake's names)."""
    import argparse
    import inspect

    from devstack import cli as devstack_cli
    from devstack.fake_expo import FakeExpo

    params = inspect.signature(FakeExpo.__init__).parameters
    assert set(devstack_cli.FAKE_EXPO_OPTIONS) <= set(params)
    parser = argparse.ArgumentParser()
    devstack_cli._register_fake_expo(parser.add_subparsers())
    args = parser.parse_args(["fake-expo", "--rate", "5", "--receipt-delay", "2"])
    options = {name: getattr(args, name) for name in devstack_cli.FAKE_EXPO_OPTIONS}
    assert (options["rate_per_second"], options["receipt_delay_s"]) == (5.0, 2.0)
