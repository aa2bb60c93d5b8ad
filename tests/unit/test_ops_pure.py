"""Pure parts of the operator commands: parsing, selection queries, percentiles, demo timing."""

from __future__ import annotations

import datetime as dt

import pytest

from ops.demo import DemoOptions, due_minutes
from ops.demo_view import PlainLog, Snapshot
from ops.doctor import check_settings
from ops.replay import Selection
from ops.stats import percentile
from shared.errors import InputError
from shared.instants import parse_instant
from shared.settings import Settings

UTC = dt.UTC


def test_parse_instant_accepts_z_and_naive_as_utc():
    assert parse_instant("2024-05-01T08:00Z") == dt.datetime(2024, 5, 1, 8, tzinfo=UTC)
    assert parse_instant("2024-05-01T08:00") == dt.datetime(2024, 5, 1, 8, tzinfo=UTC)
    assert parse_instant(None) is None
    with pytest.raises(InputError, match="ISO 8601"):
        parse_instant("yesterday")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20240501T0800Z", dt.datetime(2024, 5, 1, 8, tzinfo=UTC)),  # basic format
        ("2024-05-01T10:00+02:00", dt.datetime(2024, 5, 1, 8, tzinfo=UTC)),  # offset -> UTC
        ("2024-05-01", dt.datetime(2024, 5, 1, tzinfo=UTC)),  # a date: its UTC midnight
        ("2024-W18-3", dt.datetime(2024, 5, 1, tzinfo=UTC)),  # ISO week date
        (" 2024-05-01T08:00:00.250Z ", dt.datetime(2024, 5, 1, 8, 0, 0, 250000, tzinfo=UTC)),
    ],
)
def test_parse_instant_takes_iso_8601_forms_through_dateutil(text, expected):
    got = parse_instant(text)
    assert got == expected and got.tzinfo is UTC


@pytest.mark.parametrize("text", ["05/01/2024", "2024-13-01", "2024-05-01T25:00Z", "", "tomorrow"])
def test_parse_instant_refuses_what_is_not_iso_8601_naming_the_option(text):
    with pytest.raises(InputError, match=r"--since .* is not an ISO 8601 instant \(for example"):
        parse_instant(text, what="--since")


def test_percentile_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 95) == 95
    assert percentile(values, 100) == 100
    assert percentile([7], 95) == 7
    assert percentile([], 50) is None


def test_selection_query_uses_missed_status_and_due_range():
    since = dt.datetime(2024, 1, 1, tzinfo=UTC)
    q = Selection(since=since, categories=["meal"], users=["u1", "u2"]).query()
    assert q["status"] == "is_missed"
    assert q["scheduledAt"]["$gte"] == since
    assert q["category"] == {"$in": ["meal"]}
    assert q["userId"] == {"$in": ["u1", "u2"]}
    assert "_id" not in q
    assert Selection(ids=["a"]).query()["_id"] == {"$in": ["a"]}


def test_due_minutes_are_whole_minutes_at_least_the_lead_ahead():
    now = dt.datetime(2024, 3, 1, 10, 0, 50, 123000, tzinfo=UTC)
    dues = due_minutes(now, DemoOptions(minutes=3, min_lead_s=40))
    assert dues == [dt.datetime(2024, 3, 1, 10, m, tzinfo=UTC) for m in (2, 3, 4)]
    for d in dues:
        assert (d - now).total_seconds() >= 40


def test_check_settings_flags_grace_not_above_lead():
    s = Settings.load(wakeup={"lead_seconds": 400})
    bad = [c for c in check_settings(s) if c.status == "fail"]
    assert [c.name for c in bad] == ["category safety"]  # grace 300 s
    assert "LEAD_SECONDS" in bad[0].fix
    assert all(c.status == "ok" for c in check_settings(Settings.load()))


def _msg(mid: str, status: str, due: dt.datetime, **kw):
    return {
        "_id": mid,
        "userId": "u1",
        "timezone": "Asia/Kathmandu",
        "category": "meal",
        "scheduledAt": due,
        "status": status,
        "reason": kw.pop("reason", None),
        **kw,
    }


def test_snapshot_lateness_comes_from_the_fake_receive_time(capsys):
    due = dt.datetime(2024, 3, 1, 10, 2, tzinfo=UTC)
    due_ms = int(due.timestamp() * 1000)
    snap = Snapshot(
        messages=[
            _msg("a", "success", due),
            _msg("b", "cancelled", due, reason="reminder removed"),
        ],
        tokens=[{"_id": "t", "userId": "u1", "token": "T[x]", "isActive": False}],
        pushes=[{"to": "T", "data": {"messageId": "a"}, "received_at_ms": due_ms + 42}],
    )
    s = snap.summary()
    assert s["messages"] == {"cancelled": 1, "success": 1}
    assert s["deliveries"][0]["lateness_ms"] == 42
    assert s["deliveries"][0]["local"] == "15:47"  # Kathmandu is +05:45
    assert s["ended"] == [
        {"id": "b", "user": "u1", "status": "cancelled", "reason": "reminder removed"}
    ]
    from rich.console import Console

    log = PlainLog(Console(width=200))
    log.update(snap)
    log.update(snap)  # nothing twice
    out = capsys.readouterr().out
    assert out.count("delivered") == 1 and "lateness 42 ms" in out
    assert "cancelled u1    meal       reminder removed" in out
    assert "token deactivated for u1" in out
