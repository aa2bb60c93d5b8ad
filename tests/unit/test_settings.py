"""The settings object: env names, .env, clear errors, secrets never shown, README in sync."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ops.settings_doc import rows
from shared.settings import MOVED, Settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("TZPUSH_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no stray .env


def test_defaults_point_at_the_local_stack() -> None:
    s = Settings.load()
    assert s.mongo.uri.get_secret_value().startswith("mongodb://127.0.0.1:27017")
    assert (s.stomp.host, s.stomp.port) == ("127.0.0.1", 61613)
    assert s.expo.base_url == "http://127.0.0.1:8765"
    assert s.expo.rate_per_second == 600
    assert list(s.categories) == ["meal", "mood", "activity", "safety", "reminders", "medication"]
    assert s.queue("meal") == "/queue/tzpush.meal"


def test_the_fixed_env_names_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "TZPUSH_MONGO__URI": "mongodb://db.example:27017/?replicaSet=rs0",
        "TZPUSH_MONGO__DATABASE": "prod",
        "TZPUSH_STOMP__HOST": "mq.example",
        "TZPUSH_STOMP__PORT": "61614",
        "TZPUSH_STOMP__QUEUE_PREFIX": "push",
        "TZPUSH_STOMP__SIGNING_KEY": "0123456789abcdef0123",
        "TZPUSH_EXPO__BASE_URL": "https://exp.host",
        "TZPUSH_EXPO__ACCESS_TOKEN": "sekrit",
        "TZPUSH_EXPO__RATE_PER_SECOND": "300",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    s = Settings.load()
    assert s.mongo.database == "prod" and s.stomp.port == 61614
    assert s.queue("mood") == "/queue/push.mood"
    assert s.expo.access_token is not None and s.expo.access_token.get_secret_value() == "sekrit"
    assert s.expo.rate_per_second == 300


def test_a_shared_broker_needs_a_signing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wake-ups over a broker others can reach must be signed (issue 15); loopback may not."""
    monkeypatch.setenv("TZPUSH_STOMP__HOST", "mq.example")
    with pytest.raises(SettingsError, match="TZPUSH_STOMP__SIGNING_KEY"):
        Settings.load()
    monkeypatch.setenv("TZPUSH_STOMP__SIGNING_KEY", "short")
    with pytest.raises(SettingsError, match="at least 16 characters"):
        Settings.load()
    monkeypatch.setenv("TZPUSH_STOMP__SIGNING_KEY", "0123456789abcdef0123")
    s = Settings.load()
    assert s.stomp.signing_key is not None and "0123456789" not in repr(s)
    for host in ("127.0.0.1", "localhost", "::1"):
        monkeypatch.setenv("TZPUSH_STOMP__HOST", host)
        monkeypatch.delenv("TZPUSH_STOMP__SIGNING_KEY", raising=False)
        assert Settings.load().stomp.signing_key is None


def test_dotenv_file_works(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        'TZPUSH_STOMP__PORT=61700\nTZPUSH_CATEGORIES={"pill": {"grace_seconds": 60}}\n'
    )
    s = Settings.load()
    assert s.stomp.port == 61700
    assert list(s.categories) == ["pill"] and s.grace_seconds("pill") == 60


def test_bad_settings_give_one_line_per_problem_and_hide_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZPUSH_STOMP__PORT", "seventy")
    monkeypatch.setenv("TZPUSH_EXPO__BASE_URL", "exp.host")
    monkeypatch.setenv("TZPUSH_MONGO__URI", "postgres://user:hunter2@db")
    monkeypatch.setenv("TZPUSH_CATEGORIES", '{"Bad Name": {"grace_seconds": 5}}')
    with pytest.raises(SettingsError) as exc:
        Settings.load()
    text = str(exc.value)
    lines = text.splitlines()[1:]
    assert len(lines) == 4
    assert any(line.strip().startswith("TZPUSH_STOMP__PORT:") for line in lines)
    assert any(line.strip().startswith("TZPUSH_EXPO__BASE_URL:") for line in lines)
    assert any(line.strip().startswith("TZPUSH_MONGO__URI:") for line in lines)
    assert any(line.strip().startswith("TZPUSH_CATEGORIES:") for line in lines)
    assert "hunter2" not in text


def test_unknown_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZPUSH_EXPO__RATE", "5")
    with pytest.raises(SettingsError, match="TZPUSH_EXPO__RATE: unknown setting"):
        Settings.load()


def _services_status(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``tzpush services status`` run with only ``env`` (and a PATH) for settings."""
    return subprocess.run(
        [sys.executable, "-m", "ops.cli", "services", "status"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        cwd=ROOT,
        timeout=60,
    )


def test_the_settings_several_roles_read_have_groups_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "TZPUSH_WAKEUP__LEAD_SECONDS": "3",
        "TZPUSH_WAKEUP__WINDOW_SECONDS": "30",
        "TZPUSH_OUTCOMES__RECEIPTS_DELAY_S": "60",
        "TZPUSH_OUTCOMES__MAX_TOKEN_FAILURES": "5",
        "TZPUSH_SHUTDOWN__TIMEOUT_S": "10",
    }.items():
        monkeypatch.setenv(name, value)
    s = Settings.load()
    assert (s.wakeup.lead_seconds, s.wakeup.window_seconds) == (3, 30)
    assert (s.outcomes.receipts_delay_s, s.outcomes.max_token_failures) == (60, 5)
    assert s.shutdown.timeout_s == 10


@pytest.mark.parametrize(("group", "field"), sorted(MOVED))
def test_a_setting_under_its_old_name_is_refused_naming_the_new_one(
    monkeypatch: pytest.MonkeyPatch, group: str, field: str
) -> None:
    old = f"TZPUSH_{group.upper()}__{field.upper()}"
    monkeypatch.setenv(old, "3")
    with pytest.raises(SettingsError, match=f"{old}: moved: set {MOVED[group, field]} instead"):
        Settings.load()


def test_an_old_name_in_the_dotenv_file_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TZPUSH_CREATOR__WAKEUP_WINDOW_SECONDS=30\n")
    with pytest.raises(
        SettingsError,
        match="TZPUSH_CREATOR__WAKEUP_WINDOW_SECONDS: moved: set TZPUSH_WAKEUP__WINDOW_SECONDS",
    ):
        Settings.load()


def test_every_moved_setting_names_a_setting_that_exists() -> None:
    env_names = {env for env, _, _ in rows()}
    assert set(MOVED.values()) <= env_names
    assert not {f"TZPUSH_{g.upper()}__{f.upper()}" for g, f in MOVED} & env_names


def test_the_cli_refuses_an_old_name_at_start_and_names_the_new_one(tmp_path: Path) -> None:
    proc = _services_status({"TZPUSH_CONSUMER__SHUTDOWN_TIMEOUT_S": "25"})
    assert proc.returncode == 2
    assert (
        "TZPUSH_CONSUMER__SHUTDOWN_TIMEOUT_S: moved: set TZPUSH_SHUTDOWN__TIMEOUT_S" in proc.stderr
    )


def test_the_creator_and_the_consumer_read_no_group_of_the_other() -> None:
    """Each role reads its own group and the common ones; what two roles share is a group of
    its own (``wakeup``, ``outcomes``, ``shutdown``)."""
    foreign = {"creator": r"\.(consumer|api)\.[a-z_]+", "consumer": r"\.(creator|api)\.[a-z_]+"}
    found = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for role, pattern in foreign.items()
        for path in sorted((ROOT / role).rglob("*.py"))
        for m in re.finditer(pattern, path.read_text())
    ]
    assert found == []


def test_cli_prints_settings_errors_and_exits_2(tmp_path: Path) -> None:
    proc = _services_status({"TZPUSH_STOMP__PORT": "0", "TZPUSH_EXPO__ACCESS_TOKEN": "tok-123"})
    assert proc.returncode == 2
    assert "TZPUSH_STOMP__PORT" in proc.stderr
    assert "tok-123" not in proc.stderr + proc.stdout


def test_readme_documents_every_setting() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [env for env, _, _ in rows() if f"`{env}`" not in readme]
    assert missing == []
