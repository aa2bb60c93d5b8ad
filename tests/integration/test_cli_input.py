"""Issue 15: what the CLI takes in and prints. Ids are checked where they enter (printable, no
spaces, bounded), every bad value gets one line naming it (never a traceback), and user text is
printed as typed (never read as rich markup).

Commands run through ``ops.cli.main`` with the settings in the environment, as a shell runs them.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from collections.abc import Callable

import pytest

from ops.cli import main
from ops.doctor import run_checks
from shared.store import db as dbm
from tests.integration.harness import World

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def tzpush(world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> Run:
    s = world.settings
    env = {
        "TZPUSH_MONGO__URI": s.mongo.uri.get_secret_value(),
        "TZPUSH_MONGO__DATABASE": s.mongo.database,
        "TZPUSH_STOMP__HOST": s.stomp.host,
        "TZPUSH_STOMP__PORT": str(s.stomp.port),
        "TZPUSH_STOMP__QUEUE_PREFIX": s.stomp.queue_prefix,
        "TZPUSH_EXPO__BASE_URL": s.expo.base_url,
        "TZPUSH_LOCAL__STATE_DIR": s.local.state_dir,
        "TZPUSH_LOG_LEVEL": "WARNING",
        "COLUMNS": "200",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    def run(*argv: str, **overrides: str) -> tuple[int, str, str]:
        for key, value in overrides.items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    assert lines[0].startswith("tzpush: ")
    return lines[0]


@pytest.mark.parametrize("uid", ["bell\x07", "nul\x00x", "esc\x1b[31m", "a b", "x" * 129])
def test_a_user_id_with_control_characters_spaces_or_too_long_is_refused(tzpush: Run, uid: str):
    code, _, err = tzpush("users", "upsert", uid, "--timezone", "UTC")
    assert code == 2
    line = one_line(err)
    assert "user id" in line
    assert "\x07" not in line and "\x00" not in line and "\x1b" not in line


def test_a_device_id_or_label_with_control_characters_is_refused(tzpush: Run, world: World):
    assert tzpush("users", "upsert", "u1", "--timezone", "UTC")[0] == 0
    code, _, err = tzpush(
        "tokens", "register", "u1", "--device", "dev\x00", "--token", "ExponentPushToken[a]"
    )
    assert code == 2 and "device id" in one_line(err)
    code, _, err = tzpush(
        "reminders", "add", "u1", "--category", "meal", "--label", "lunch\x1b[2J", "--at", "12:30"
    )
    assert code == 2 and "label" in one_line(err)
    assert world.db[dbm.TOKENS].count_documents({}) == 0
    assert world.db[dbm.REMINDERS].count_documents({}) == 0


@pytest.mark.parametrize("cap", ["1e30", "1" + "0" * 30, "0", "-3", "many"])
def test_a_bad_daily_cap_gets_one_line_naming_it(tzpush: Run, world: World, cap: str):
    code, _, err = tzpush("users", "upsert", "capped", "--timezone", "UTC", "--daily-cap", cap)
    assert code == 2
    line = one_line(err)
    assert "daily cap" in line or "--daily-cap" in line
    assert world.db[dbm.USERS].count_documents({"_id": "capped"}) == 0


@pytest.mark.parametrize(
    "uri",
    [
        "mongodb://127.0.0.1:99999/",
        "mongodb://",
        "mongodb://h/?directConnection=maybe",
        "mongodb://h/?foo=1",
        "mongodb+srv://h:27017/",
    ],
)
def test_a_bad_mongo_uri_gets_one_line_naming_the_setting(tzpush: Run, uri: str):
    code, out, err = tzpush("doctor", TZPUSH_MONGO__URI=uri)
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[0] == "tzpush: invalid settings:"
    assert len(lines) == 2 and lines[1].strip().startswith("TZPUSH_MONGO__URI:")
    assert "Traceback" not in out + err


def test_doctor_reports_a_database_it_cannot_even_configure(world: World):
    mongo = world.settings.mongo.model_copy(
        update={"uri": type(world.settings.mongo.uri)("mongodb://")}
    )
    bad = world.settings.model_copy(update={"mongo": mongo})  # past the settings' own check
    checks = {c.name: c for c in run_checks(bad)}
    assert checks["database"].status == "fail"
    assert "TZPUSH_MONGO__URI" in checks["database"].fix


def test_markup_in_ids_and_labels_is_printed_as_typed(tzpush: Run):
    uid = "[bold]u[/]"
    assert tzpush("users", "upsert", uid, "--timezone", "UTC")[0] == 0
    assert (
        tzpush(
            "tokens", "register", uid, "--device", "[red]d", "--token", "  ExponentPushToken[x]  "
        )[0]
        == 0
    )
    assert (
        tzpush(
            "reminders",
            "add",
            uid,
            "--category",
            "meal",
            "--label",
            "[/x] pill [red]now",
            "--at",
            "12:30",
        )[0]
        == 0
    )
    code, out, err = tzpush("reminders", "list", uid)
    assert code == 0, err
    assert "[/x] pill [red]now" in out and uid in out
    code, out, err = tzpush("tokens", "list", uid)
    assert code == 0, err
    assert "[red]d" in out and "ExponentPushToken[x]" in out and uid in out


def test_tokens_are_stored_stripped(tzpush: Run, world: World):
    assert tzpush("users", "upsert", "s1", "--timezone", "UTC")[0] == 0
    assert (
        tzpush("tokens", "register", "s1", "--device", "d1", "--token", " ExponentPushToken[s] \n")[
            0
        ]
        == 0
    )
    (tok,) = world.db[dbm.TOKENS].find({"userId": "s1"})
    assert tok["token"] == "ExponentPushToken[s]"


def test_erasing_a_user_from_the_cli_needs_yes_and_leaves_nothing_personal(
    tzpush: Run, world: World
):
    """The API's erasure (creator.accounts.erase_user), from the shell; refused without --yes."""
    world.user("erin", device="phone", token="ExponentPushToken[erin]")
    code, _, err = tzpush("users", "erase", "erin")
    assert code != 0 and "--yes" in one_line(err)
    assert world.db[dbm.USERS].count_documents({"_id": "erin"}) == 1
    code, out, _ = tzpush("users", "erase", "erin", "--yes")
    assert code == 0 and "erased" in out and "1 devices deactivated" in out
    assert world.db[dbm.USERS].count_documents({"_id": "erin"}) == 0
    assert world.db[dbm.TOKENS].count_documents({"userId": "erin"}) == 0


def test_a_logout_from_the_cli_deactivates_only_that_users_registration(tzpush: Run, world: World):
    world.user("finn", device="shared-phone", token="ExponentPushToken[shared]")
    world.user("gwen", device="shared-phone", token="ExponentPushToken[shared]")  # takes it
    code, out, _ = tzpush("tokens", "logout", "finn", "--device", "shared-phone")
    assert code == 0 and out.startswith("0 registration")  # finn's was already taken over
    active = list(world.db[dbm.TOKENS].find({"deviceId": "shared-phone", "isActive": True}))
    assert [t["userId"] for t in active] == ["gwen"]
    code, out, _ = tzpush("tokens", "logout", "gwen", "--device", "shared-phone")
    assert code == 0 and out.startswith("1 registration")
    assert world.db[dbm.TOKENS].count_documents({"isActive": True}) == 0


def test_a_fake_expo_on_a_taken_port_gets_one_line_saying_what_to_do(tzpush: Run):
    """`tzpush fake-expo &` from the README while `make run` holds its port (a README
    walk-through): it died with a traceback ending in "Address already in use"."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = tzpush("fake-expo", "--port", str(port))
    assert code == 2
    line = one_line(err)
    assert f"127.0.0.1:{port}" in line and "--port" in line


def test_messages_list_shows_a_users_messages_by_due_instant_with_whole_ids(
    tzpush: Run, world: World, monkeypatch: pytest.MonkeyPatch
):

    t0 = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)
    docs = [
        {
            "_id": f"lunch-reminder-of-someone:{v}:registration-{i:04d}:2026-12-0{i + 1}",
            "userId": "m1",
            "category": "meal",
            "scheduledAt": t0 + dt.timedelta(days=i),
            "status": status,
            **({"reason": reason} if reason else {}),
        }
        for i, (v, status, reason) in enumerate(
            [(1, "success", None), (1, "failed", "InvalidCredentials"), (2, "pending", None)]
        )
    ]
    world.db[dbm.MESSAGES].insert_many([*docs, {**docs[0], "_id": "x", "userId": "other"}])
    code, out, err = tzpush("messages", "list", "m1", "--json")
    assert code == 0, err
    assert [r["_id"] for r in json.loads(out)] == [d["_id"] for d in docs]
    code, out, _ = tzpush("messages", "list", "m1", "--status", "failed", "--json")
    assert [r["reason"] for r in json.loads(out)] == ["InvalidCredentials"]
    code, out, _ = tzpush("messages", "list", "m1", "--since", "2026-12-02T00:00Z", "--json")
    assert len(json.loads(out)) == 2
    # A table on a narrow terminal folds a long id instead of cutting it.
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = tzpush("messages", "list", "m1", "--limit", "2")
    id_column = "".join(
        line.split("│")[-2].strip() for line in out.splitlines() if line.startswith("│")
    )
    assert code == 0 and id_column == docs[0]["_id"] + docs[1]["_id"], out
    assert "…" not in out and "more: tzpush messages list --limit 2 --after" in out
    code, _, err = tzpush("messages", "list", "m1", "--since", "yesterday")
    assert code == 2 and "since 'yesterday'" in one_line(err)
    code, _, err = tzpush("messages", "list", "bad user")
    assert code == 2 and "user id" in one_line(err)


def _seed_crowd(world: World, uid: str) -> list[str]:
    """60 messages due at one instant (5 of them failed), one an hour later."""

    t0 = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)
    docs = [
        {
            "_id": f"{uid}-m{i:02d}",
            "userId": uid,
            "category": "meal",
            "scheduledAt": t0,
            "status": "failed" if i % 12 == 0 else "pending",
        }
        for i in range(60)
    ]
    docs.append({**docs[1], "_id": f"{uid}-z-late", "scheduledAt": t0 + dt.timedelta(hours=1)})
    world.db[dbm.MESSAGES].insert_many(docs)
    return [d["_id"] for d in docs]


def test_messages_list_leads_past_a_crowded_instant_keeping_its_options(tzpush: Run, world: World):

    ids = _seed_crowd(world, "p1")
    argv = ["messages", "list", "p1", "--limit", "25", "--json"]
    seen: list[str] = []
    for _ in range(10):
        code, out, err = tzpush(*argv)
        assert code == 0, err
        seen += [r["_id"] for r in json.loads(out)]
        if "more:" not in err:
            break
        argv = shlex.split(err.split("more:", 1)[1].split("(", 1)[0])[1:]
        assert argv[argv.index("--limit") + 1] == "25" and "--json" in argv
    assert seen == ids
    code, out, err = tzpush("messages", "list", "p1", "--status", "failed", "--limit", "2")
    hint = out.split("more:", 1)[1]
    assert "--status failed" in hint and "--limit 2" in hint


def test_messages_list_refuses_in_one_line_and_prints_text_as_text(tzpush: Run, world: World):
    code, _, err = tzpush("messages", "list", "u1", "--since", "9999-12-31T23:00-05:00")
    assert code == 2 and "out of range" in one_line(err)
    down = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300"
    code, _, err = tzpush("messages", "list", "u1", TZPUSH_MONGO__URI=down)
    assert code == 1 and one_line(err)
    code, _, err = tzpush("messages", "show", "x", TZPUSH_MONGO__URI=down)
    assert code == 1 and one_line(err)


def test_table_cells_show_control_characters_escaped_and_hints_quote_ids(tzpush: Run, world: World):

    due = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)
    evil = "receipt error \x1b]0;owned\x07\x1b[2J\x1b[31m"
    base = {"category": "meal", "scheduledAt": due, "status": "failed", "reason": evil}
    world.db[dbm.MESSAGES].insert_many(
        [{**base, "_id": f"q{i}", "userId": "it's"} for i in range(2)]
    )
    code, out, _ = tzpush("messages", "list", "it's", "--limit", "1")
    assert code == 0 and "\x1b" not in out and "\\x1b" in out
    assert "messages list --limit 1" in out and "-- 'it'\"'\"'s'" in out
