"""The HTTP API's pure parts: keys, edge checks, cursors, settings, and the lazy CLI import."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import SecretStr

from api import checks, pages
from api.keys import KeyRing, Principal, hash_key, new_key
from api.problems import ApiProblem
from shared.settings import ApiKey, Settings, SettingsError


def _ring(**scopes: str) -> tuple[KeyRing, dict[str, str]]:
    keys = {name: new_key() for name in scopes}
    ring = KeyRing(
        [ApiKey(name=n, scope=s, sha256=SecretStr(hash_key(keys[n]))) for n, s in scopes.items()]
    )
    return ring, keys


def test_keys_are_known_by_their_hash_and_carry_their_scope():
    ring, keys = _ring(backend="app", oncall="ops")
    assert ring.identify(keys["backend"]) == Principal("backend", "app")
    assert ring.identify(keys["oncall"]) == Principal("oncall", "ops")
    for bad in (None, "", keys["backend"] + "x", keys["backend"][:-1], "\ud800"):
        assert ring.identify(bad) is None
    assert Principal("a", "ops").may("app") and Principal("a", "ops").may("ops")
    assert Principal("a", "app").may("app") and not Principal("a", "app").may("ops")
    assert new_key() != new_key() and new_key().startswith("tzp_")


def test_api_settings_from_the_environment_one_line_per_bad_setting(monkeypatch):
    good = [{"name": "backend", "scope": "app", "sha256": hash_key("k")}]
    monkeypatch.setenv("TZPUSH_API__KEYS", json.dumps(good))
    monkeypatch.setenv("TZPUSH_API__PORT", "9090")
    s = Settings.load()
    assert s.api.port == 9090 and s.api.host == "127.0.0.1"
    assert s.api.keys[0].scope == "app" and hash_key("k") not in repr(s.api)
    bad = [
        {"name": "a b", "scope": "root", "sha256": "secret-key-pasted-by-mistake"},
        {"name": "ok", "scope": "app", "sha256": hash_key("k")},
    ]
    monkeypatch.setenv("TZPUSH_API__KEYS", json.dumps(bad))
    with pytest.raises(SettingsError) as err:
        Settings.load()
    text = str(err.value)
    assert "TZPUSH_API__KEYS__0__NAME" in text and "TZPUSH_API__KEYS__0__SCOPE" in text
    assert "TZPUSH_API__KEYS__0__SHA256: must be 64 hex digits" in text
    assert "secret-key-pasted-by-mistake" not in text
    twice = [good[0], {**good[0], "name": "again"}]
    monkeypatch.setenv("TZPUSH_API__KEYS", json.dumps(twice))
    with pytest.raises(SettingsError, match="same hash"):
        Settings.load()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"a": [1, 2.5, None, True, "x", {"b": "c"}]}, None),
        ({"a\x00": 1}, "NUL"),
        ({"$x": 1}, "leading '$'"),
        ({"n": 2**63}, "past 64 bits"),
        ({"n": -(2**63)}, None),
        ({"f": float("nan")}, "finite"),
        ({"f": float("inf")}, "finite"),
        ({"s": "\ud800"}, "surrogate"),
        ({"d": json.loads("[" * 20 + "]" * 20)}, "deeper than 16"),
    ],
)
def test_data_that_the_database_or_expo_would_choke_on_is_named(data, problem):
    found = checks.data_problem(data)
    assert (found is None) if problem is None else (problem in (found or "")), found


def test_ids_follow_the_cli_rule_and_fit_one_path_segment():
    assert checks.check_id("user-1:x", "user id") == "user-1:x"
    for bad, why in (
        ("a b", "space"),
        ("a/b", "'/'"),
        ("x" * 129, "129 characters"),
        ("", "empty"),
    ):
        with pytest.raises(ValueError, match=why):
            checks.check_id(bad, "user id")


def test_instants_are_parsed_as_the_cli_parses_them():
    assert checks.instant("2026-05-01T08:00+02:00", "since").isoformat() == (
        "2026-05-01T06:00:00+00:00"
    )
    with pytest.raises(ValueError, match="out of range"):
        checks.instant("0001-01-01T00:00+01:00", "since")
    with pytest.raises(ValueError, match="not an ISO 8601 instant"):
        checks.instant("yesterday", "since")


def test_cursors_round_trip_and_garbage_is_a_422_naming_after():
    c = pages.encode("messages", [1767225600000, "m:1"])
    assert pages.decode(c, "messages", (int, str)) == [1767225600000, "m:1"]
    another_list = pages.encode("devices", [1767225600000, "m:1"])
    bad_cursors = ("garbage", pages.encode("messages", ["x"]), another_list, "%%%", "e30")
    for bad in (*bad_cursors, pages.encode("messages", [1, 2])):
        with pytest.raises(ApiProblem) as err:
            pages.decode(bad, "messages", (int, str))
        assert err.value.status == 422 and err.value.errors[0]["name"] == "after"
    x = _request("/v1/x")
    assert pages.next_link(x, {"limit": 2, "status": None}, "abc") == "/v1/x?limit=2&after=abc"
    assert pages.next_link(x, {"limit": 2}, None) is None
    odd = _request("/v1/users/a/b", raw=b"/v1/users/a%2Fb")  # as sent, not as decoded
    assert pages.next_link(odd, {}, "abc") == "/v1/users/a%2Fb?after=abc"


def _request(path: str, raw: bytes | None = None) -> Any:
    from starlette.requests import Request

    scope = {"type": "http", "path": path, "raw_path": raw or path.encode(), "headers": []}
    return Request({**scope, "query_string": b""})


def test_the_api_command_imports_fastapi_only_when_it_runs():
    code = (
        "import sys; from ops.cli import build_parser; build_parser('api'); build_parser(); "
        "print(','.join(m for m in ('fastapi', 'uvicorn', 'starlette', 'api.app') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_new_key_prints_a_key_and_its_settings_entry(capsys):
    from ops.cli import main

    assert main(["api", "--new-key", "backend", "--scope", "ops"]) == 0
    out = capsys.readouterr().out
    key = out.split("it is not stored anywhere): ")[1].split()[0]
    entry = json.loads(out.split("TZPUSH_API__KEYS): ")[1])
    assert entry == {"name": "backend", "scope": "ops", "sha256": hash_key(key)}
    assert main(["api", "--new-key", "bad name"]) == 2


def test_a_users_messages_are_read_in_windows_that_meet_end_to_end():
    """``ranges_forward`` and ``ranges_back`` (shared.store.mongo.history): windows that grow, each
    starting where the last ended, the last one open (or ending at ``end``); nothing read
    twice, no gap; an instant at the ends of time gives the rest in one window, not an
    overflow (a 500)."""
    import datetime as dt

    from shared.store.mongo.history import BACK, ranges_back, ranges_forward

    t = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)
    fwd = list(ranges_forward(t, None))
    assert len(fwd) == len(BACK) + 1 and fwd[0] == {"$gte": t, "$lt": t + BACK[0]}
    for a, b in itertools.pairwise(fwd):
        assert b["$gte"] == a["$lt"] and set(a) == {"$gte", "$lt"}
    assert fwd[-1] == {"$gte": t + BACK[-1]}
    end = t + dt.timedelta(days=10)
    bounded = list(ranges_forward(t, end))
    assert bounded[-1] == {"$gte": bounded[-2]["$lt"], "$lt": end} and bounded[-2]["$lt"] < end
    assert list(ranges_forward(t, t)) == [{"$gte": t, "$lt": t}]  # an empty range, read once
    back = list(ranges_back(t))
    assert back[0] == {"$lte": t, "$gt": t - BACK[0]}
    for a, b in itertools.pairwise(back):
        assert b["$lte"] == a["$gt"]
    assert back[-1] == {"$lte": t - BACK[-1]}
    far = dt.datetime(9999, 12, 31, 23, tzinfo=dt.UTC)
    assert list(ranges_forward(far, None)) == [{"$gte": far}]
    early = dt.datetime(1, 1, 2, tzinfo=dt.UTC)
    assert list(ranges_back(early)) == [
        {"$lte": early, "$gt": early - BACK[0]},
        {"$lte": early - BACK[0]},
    ]
